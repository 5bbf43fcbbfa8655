"""A scheduler over in-memory state views (plain dicts as the tables), for scheduler-level tests."""

from __future__ import annotations

import json

from streams.worker.scheduling.state import Scheduler
from streams.worker.state_tables import Inventory, NetState


def win(end: float, p95: float, lost: int = 0) -> dict:
    """An rtt_ms window result ending at ``end`` with this p95 (p50 = 0.9 x p95)."""
    return {"window_start": end - 10, "window_end": end, "count": 100, "kept": 100 - lost, "outliers": 0,
            "lost": lost, "mean": p95 * 0.9, "p50": p95 * 0.9, "p95": p95, "p99": p95, "min": p95 * 0.8, "max": p95}


def gpu_node(node: str, now: float, fp16: float = 1000.0, **extra) -> dict:
    """A compute report of an 8-card node as the inventory keeps it."""
    return {"node": node, "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu",
            "peak_tflops": {"fp16": fp16, "int8": 2 * fp16, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
            "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0, **extra}


def make_scheduler(nodes: list[dict], paths: dict[tuple[str, str], dict]) -> Scheduler:
    """``nodes``: compute reports; ``paths``: (src, dst) -> {metric: window result}."""
    inv = {r["node"].encode(): json.dumps(r).encode() for r in nodes}
    net = {f"{s}|{d}".encode(): json.dumps({"src": s, "dst": d, "metrics": m}).encode() for (s, d), m in paths.items()}
    return Scheduler(NetState(net), Inventory(inv))


async def send_reports(settings, reports: list[dict]) -> None:
    """Compute reports (gpu_node's shape, ``received_at`` dropped: the worker sets it) on compute.nodes
    through the real broker, keyed by node, as node agents send them."""
    from schemas.topics import COMPUTE_NODES
    from streams.kafka import producer

    p = producer(settings)
    await p.start()
    try:
        for r in reports:
            doc = {k: v for k, v in r.items() if k != "received_at"}
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(doc).encode(), key=r["node"].encode())
    finally:
        await p.stop()
