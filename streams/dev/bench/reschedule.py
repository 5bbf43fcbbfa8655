"""`cnsched bench reschedule`: a window result in -> the reschedule event out, through the
scheduler's own state layer, with many running tasks."""

from __future__ import annotations

import time

import numpy as np


def bench_reschedule(nodes: int = 1000, peers: int = 10, tasks: int = 1000, stores: int = 100, seed: int = 0) -> dict:
    """Window result in -> reschedule event out, through the scheduler's own state layer (the
    parsed table views, the path table, the kernel, the policy) on ``nodes x peers`` paths with
    four metrics each and ``tasks`` running tasks; Kafka transport is not part of it."""
    import json as _json

    from schemas.sched import Task
    from streams.worker.scheduling.state import Scheduler
    from streams.worker.state_tables import Inventory, NetState

    rng = np.random.default_rng(seed)
    now = time.time()
    inv_t: dict = {}
    net_t: dict = {}

    def win(end, p95, mean=None, lost=0):
        return {"window_start": end - 10, "window_end": end, "count": 100, "kept": 100 - lost, "outliers": 0,
                "lost": lost, "mean": p95 * 0.9 if mean is None else mean, "p50": p95 * 0.9, "p95": p95,
                "p99": p95, "min": p95 * 0.8, "max": p95}

    for i in range(nodes):
        inv_t[f"n{i}".encode()] = _json.dumps({
            "node": f"n{i}", "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu",
            "peak_tflops": {"fp16": 1000, "int8": 2000, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
            "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0}).encode()
        for k in range(peers):
            j = (i + 1 + k) % nodes
            net_t[f"n{i}|n{j}".encode()] = _json.dumps({"src": f"n{i}", "dst": f"n{j}", "metrics": {
                "rtt_ms": win(now, float(rng.uniform(0.2, 2))), "bw_util": win(now, 0.3, 0.3),
                "retrans_rate": win(now, 0.0, 0.0), "loss_rate": win(now, 0.0, 0.0)}}).encode()
    for k in range(stores):
        for i in range(10):
            node = f"n{(k * 10 + i) % nodes}"
            net_t[f"{node}|store{k}".encode()] = _json.dumps({"src": node, "dst": f"store{k}", "metrics": {
                "rtt_ms": win(now, float(rng.uniform(0.2, 2)))}}).encode()
    sched = Scheduler(NetState(net_t), Inventory(inv_t))
    t = time.perf_counter()
    for k in range(tasks):
        # tasks that read from their store all along (alpha given: left to the one-node rule, a task
        # loading nothing would be scored by compute alone and never move for its path)
        sched.decide(Task(id=f"t{k}", type="training-data-parallel", resources={"cards": 1}, alpha=0.2,
                          data_source={"node": f"store{k % stores}", "size_gb": 0}, checkpoint_gb=1,
                          expected_duration_s=7200), now)
    decide_s = (time.perf_counter() - t) / tasks
    t = time.perf_counter()
    sched.reschedule(now)
    quiet_s = time.perf_counter() - t
    run = sched.running["t0"]
    key = f"{run.nodes[0]}|{run.task.data_source.node}".encode()
    rec = _json.loads(_json.dumps(sched.net.get_key(key)))
    rec["metrics"]["rtt_ms"] = win(now + 10, 300.0, lost=10)  # latency x150, 10 % loss
    t = time.perf_counter()
    sched.net.put(key, rec)
    sched.touch()
    events = sched.reschedule(now + 11)
    react_s = time.perf_counter() - t
    return {
        "nodes": nodes, "paths": len(net_t), "metrics_per_path": 4, "running_tasks": len(sched.running),
        "decide_per_task_s": decide_s, "rescore_without_change_s": quiet_s,
        "window_to_reschedule_s": react_s, "reschedule_events": len(events),
        "moved_t0": any(e.task_id == "t0" for e in events),
    }
