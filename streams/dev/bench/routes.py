"""`cnsched bench routes`: a service's routing weights — the worker's whole computation
(streams/worker/scheduling/routing.py: gathering the measured paths, the split, the message) on a
scheduler of many nodes, its p50 and p99 against issue 54's bound (100 ms from a change), and the
numba split beside its plain-Python reference on the same inputs."""

from __future__ import annotations

import json
import math
import time

import numpy as np


def bench_routes(nodes: int = 1000, replicas: int = 64, origins: int = 20, rounds: int = 50, seed: int = 0) -> dict:
    from core.routing import split, split_reference
    from schemas.sched import Task, TaskEvent
    from streams.worker.scheduling.routing import routes_for
    from streams.worker.scheduling.services import Service, evaluate
    from streams.worker.scheduling.state import Scheduler
    from streams.worker.state_tables import Inventory, NetState

    rng = np.random.default_rng(seed)
    now = 1_000_000.0

    def win(p95: float) -> dict:
        return {"window_start": now - 10, "window_end": now, "count": 100, "kept": 100, "outliers": 0, "lost": 0,
                "mean": p95 * 0.9, "p50": p95 * 0.9, "p95": p95, "p99": p95, "min": p95 * 0.8, "max": p95}

    inv = {f"n{i:04d}".encode(): json.dumps({
        "node": f"n{i:04d}", "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu", "rack": f"r{i // 16}",
        "peak_tflops": {"fp16": 1000, "int8": 2000, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
        "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0}).encode() for i in range(nodes)}
    # each origin measured to every rack (as probes at the users' edge measure a site's racks)
    net = {f"users.o{o}|rack:r{g}".encode(): json.dumps({"src": f"users.o{o}", "dst": f"rack:r{g}", "metrics": {
        "rtt_ms": win(float(rng.uniform(2, 200)))}}).encode() for o in range(origins) for g in range(math.ceil(nodes / 16))}
    s = Scheduler(NetState(net), Inventory(inv))
    s.node_timeout_s, s.freshness = math.inf, None
    share = 1.0 / origins
    svc = Service(Task(id="chat", type="inference", resources={"cards": 8}, submitted_at=now, scaling={
        "min_replicas": replicas, "max_replicas": replicas, "prescale_lead_s": 0, "replica_rate": 10.0,
        "origins": [{"name": f"o{o}", "endpoint": f"users.o{o}", "share": share} for o in range(origins)]}))
    evaluate(s, svc, now, reason="created")
    for r in svc.replicas:
        s.start(r, s.running[r].nodes, None)
    svc.remember(TaskEvent(task_id="chat", event="load", at=now, utilisation=0.6, request_rate=0.6 * 10 * replicas),
                 replicas)
    routes_for(s, svc, now, "load")  # compiled and the path table built: what a live worker has already
    took = []
    for k in range(rounds):
        t0 = time.perf_counter()
        routes_for(s, svc, now + k, "window")
        took.append((time.perf_counter() - t0) * 1e3)
    lam = rng.uniform(1, 10, origins)
    mu = np.full(replicas, 1.2 * lam.sum() / replicas)
    delay = rng.uniform(0.002, 0.2, (origins, replicas))
    warm = np.ones(replicas, bool)
    t0 = time.perf_counter()
    a = split(delay, lam, mu, warm)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = split_reference(delay, lam, mu, warm)
    ref = time.perf_counter() - t0
    return {"nodes": nodes, "replicas": len(svc.replicas), "origins": origins, "rounds": rounds,
            "routes_ms_p50": float(np.percentile(took, 50)), "routes_ms_p99": float(np.percentile(took, 99)),
            "bound_ms": 100.0, "split_ms": ours * 1e3, "split_reference_ms": ref * 1e3,
            "split_ratio_reference_over_ours": ref / ours, "same_split": bool(np.allclose(a.x, b.x, atol=1e-6))}
