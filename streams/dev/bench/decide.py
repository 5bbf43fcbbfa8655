"""`cnsched bench decide`: decisions per second through the scheduler's own state layer, a burst of
queued tasks decided one call each (the baseline) beside one batch (``Scheduler.decide_many``: one
node view, one kernel call per network profile), on the same cluster and tasks.

The cluster: ``nodes`` 8-card nodes in racks of 8 over 4 sites, probed at rack level (every rack
pair, both ways, and every rack to each site's store; see streams.worker.scheduling.path_table) —
what an operator probes at this size instead of every node pair. The tasks: a mix of 1-8 card
tasks, a fifth of them gangs of 2-4 nodes, half reading from a store.
"""

from __future__ import annotations

import json
import time

import numpy as np

SITES = 4
RACK = 8


def _world(nodes: int, seed: int, now: float | None = None, rack: int | None = None):
    """``rack``: nodes per rack (None: the module's ``RACK``, which bench/decide_rev.py's driver sets,
    as older revisions' ``_world`` read only that)."""
    from streams.worker.scheduling.state import Scheduler
    from streams.worker.state_tables import Inventory, NetState

    rack = RACK if rack is None else rack
    rng = np.random.default_rng(seed)
    now = time.time() if now is None else now  # two worlds compared: the same clock (bookings read it)
    racks = max(nodes // rack, 1)
    inv: dict = {}
    net: dict = {}

    def win(p95):
        return {"window_start": now - 10, "window_end": now, "count": 100, "kept": 100, "outliers": 0, "lost": 0,
                "mean": p95 * 0.9, "p50": p95 * 0.9, "p95": p95, "p99": p95, "min": p95 * 0.8, "max": p95}

    site = [r * SITES // racks for r in range(racks)]
    for i in range(nodes):
        r = min(i // rack, racks - 1)
        inv[f"n{i}".encode()] = json.dumps({
            "node": f"n{i}", "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu", "rack": f"r{r}",
            "peak_tflops": {"fp16": float(rng.choice([400, 1000])), "fp32": 100}, "mem_gb": 80,
            "host_mem_gb": 1024, "inter_bw_gbps": 400}).encode()
    for a in range(racks):
        for b in range(racks):
            rtt = 0.05 if a == b else (0.2 if site[a] == site[b] else float(rng.uniform(10, 80)))
            net[f"rack:r{a}|rack:r{b}".encode()] = json.dumps(
                {"src": f"rack:r{a}", "dst": f"rack:r{b}", "metrics": {"rtt_ms": win(rtt)}}).encode()
        for s in range(SITES):
            rtt = 0.3 if site[a] == s else float(rng.uniform(10, 80))
            net[f"store{s}|rack:r{a}".encode()] = json.dumps(
                {"src": f"store{s}", "dst": f"rack:r{a}", "metrics": {"rtt_ms": win(rtt)}}).encode()
    return Scheduler(NetState(net), Inventory(inv), node_timeout_s=float("inf")), now, len(net)


def _tasks(n: int, seed: int, tag: str):
    from schemas.sched import Task

    rng = np.random.default_rng(seed + 1)
    out = []
    for k in range(n):
        gang = int(rng.integers(2, 5)) if rng.random() < 0.2 else 1
        store = {"data_source": {"node": f"store{k % SITES}", "size_gb": 50}} if k % 2 else {}
        out.append(Task(id=f"{tag}{k}", type="training-data-parallel", peers=gang,
                        resources={"cards": int(rng.choice([1, 2, 4, 8])) if gang == 1 else 8}, **store))
    return out


def bench_decide(node_counts=(1000, 5000), tasks: int = 500, seed: int = 0, rack: int = RACK) -> dict:
    """``rack``: nodes per rack (every rack pair is probed: 8 per rack at 50,000 nodes would be 39
    million rack-level paths; 40 per rack, 1.6 million)."""
    out: dict = {"tasks_per_burst": tasks, "rack_size": rack}
    from streams.worker.warm import compile_decisions, compile_scoring

    compile_scoring()  # every kernel compiled (or loaded) before timing, as the worker does at start
    compile_decisions()
    for n in node_counts:
        one, now, paths = _world(n, seed, rack=rack)
        many, _, _ = _world(n, seed, now, rack)
        burst = _tasks(tasks, seed, "t")
        one.nodes(now), many.nodes(now)  # the node view is built once per inventory version, not per burst
        t = time.perf_counter()
        a = [one.decide(task, now) for task in burst]
        one_s = time.perf_counter() - t
        t = time.perf_counter()
        b = many.decide_many(burst, now)
        many_s = time.perf_counter() - t
        out[f"nodes_{n}"] = {
            "rack_level_paths": paths, "placed": sum(d.status == "placed" for d in b),
            "same_decisions": [d.nodes for d in a] == [d.nodes for d in b],
            "one_at_a_time_per_s": round(tasks / one_s, 1), "batch_per_s": round(tasks / many_s, 1),
            "ratio": round(one_s / many_s, 2),
        }
    return out
