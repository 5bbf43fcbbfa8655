"""Waiting for a worker started by a dev command (fuzz, contract, bench api) to serve its API."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request


def listed(port: int) -> int:
    """How many nodes the worker at ``port`` lists (GET /compute/nodes), -1 while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/compute/nodes?limit=1", timeout=5) as r:
            return int(json.loads(r.read())["total"])
    except (OSError, ValueError, KeyError):  # not up yet, or up but not serving the API yet
        return -1


async def until_listed(port: int, nodes: int = 0, worker=None, limit_s: float = 120.0, what: str = "the worker") -> None:
    """Until the worker at ``port`` answers and lists at least ``nodes`` nodes; RuntimeError when
    ``worker`` (a Popen) exits first or ``limit_s`` passes."""
    end = time.monotonic() + limit_s
    while await asyncio.to_thread(listed, port) < nodes:
        if time.monotonic() > end or (worker is not None and worker.poll() is not None):
            raise RuntimeError(f"{what} did not list {nodes} nodes within {limit_s:.0f} s" if nodes
                               else f"{what} did not become ready")
        await asyncio.sleep(0.3)
