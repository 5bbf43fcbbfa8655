"""Compute reports sent on a timer: what the Slurm bridge's inventory and the node agent share."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from schemas.topics import COMPUTE_NODES
from streams.config import Settings
from streams.kafka import producer


async def report_every(settings: Settings, read: Callable[[], list[dict]], interval_s: float, stop: asyncio.Event,
                       once: bool = False) -> int:
    """Send ``read()``'s reports on ``compute.nodes`` (keyed by node) every ``interval_s`` until ``stop``
    (or once); ``read`` runs in a thread (it calls scontrol or nvidia-smi). The reports sent."""
    p = producer(settings)
    await p.start()
    sent = 0
    try:
        while True:
            reports = await asyncio.to_thread(read)
            for r in reports:
                await p.send(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
            await p.flush()
            sent += len(reports)
            if once:
                return sent
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
                return sent
            except TimeoutError:
                pass
    finally:
        await p.stop()
