"""The worker's API from tests: (status, JSON body) on 127.0.0.1:port."""

from __future__ import annotations

from streams.client import call as _call
from tests.helpers.openapi import check_answer


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """The answer, checked against the worker's OpenAPI document (tests/helpers/openapi.py)."""
    status, answer = _call(f"http://127.0.0.1:{port}", method, path, body)
    check_answer(method, path, status, answer)
    return status, answer


def get(port: int, path: str) -> tuple[int, dict]:
    return call(port, "GET", path)


def get_text(port: int, path: str) -> str:
    """A plain-text answer (e.g. /metrics)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


async def wait_nodes(port: int, n: int, timeout_s: float = 60.0) -> dict:
    """The worker's ``GET /compute/nodes`` once it lists ``n`` nodes (the answer as it is at the timeout)."""
    import asyncio
    import time

    deadline, body = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        try:
            status, body = await asyncio.to_thread(call, port, "GET", "/compute/nodes")
            if status == 200 and body["total"] == n:
                return body
        except OSError:
            pass
        await asyncio.sleep(0.3)
    return body
