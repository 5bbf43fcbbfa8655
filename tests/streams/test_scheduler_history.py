"""The scheduler with what history teaches it: learned type alphas, and forecasts (preventive
rescheduling) that move a task before its path degrades."""

import dataclasses
import json
import time

from core.sensitivity import DEFAULT_TYPES
from schemas.sched import Task
from streams.scheduler import Scheduler
from streams.state_tables import Inventory, NetState


def win(end, p95):
    return {"window_start": end - 10, "window_end": end, "count": 100, "kept": 100, "outliers": 0, "lost": 0,
            "mean": p95 * 0.9, "p50": p95 * 0.9, "p95": p95, "p99": p95, "min": p95 * 0.8, "max": p95}


def scheduler(now):
    inv, net = {}, {}
    for i, tflops in enumerate((1000, 900)):  # n0 computes a little faster
        inv[f"n{i}".encode()] = json.dumps({
            "node": f"n{i}", "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu",
            "peak_tflops": {"fp16": tflops, "int8": 2 * tflops, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
            "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0}).encode()
        net[f"n{i}|store".encode()] = json.dumps({"src": f"n{i}", "dst": "store",
                                                  "metrics": {"rtt_ms": win(now, 0.5)}}).encode()
    return Scheduler(NetState(net), Inventory(inv))


def task(**kw):
    return Task(id="t", type="training-data-parallel", resources={"cards": 1}, checkpoint_gb=1,
                expected_duration_s=7200, data_source={"node": "store", "size_gb": 1}, **kw)


def test_learned_alpha_is_the_type_default_and_an_explicit_alpha_still_wins():
    now = time.time()
    s = scheduler(now)
    assert s.decide(task(), now).alpha == DEFAULT_TYPES["training-data-parallel"].alpha
    s.running.clear()
    s.types = {**s.types, "training-data-parallel": dataclasses.replace(DEFAULT_TYPES["training-data-parallel"],
                                                                         alpha=0.45)}
    d = s.decide(task(), now)
    assert d.alpha == 0.45 and d.task_type == "training-data-parallel"
    s.running.clear()
    assert s.decide(task(alpha=0.9), now).alpha == 0.9


def test_a_forecast_degradation_moves_the_task_before_the_path_degrades():
    now = time.time()
    s = scheduler(now)
    d = s.decide(task(network_profile="latency"), now)  # latency weighs rtt most
    home = d.nodes[0]
    other = "n1" if home == "n0" else "n0"
    # the record of the counterfactual: alpha = 1 picks the faster node
    assert d.compute_only_nodes == ["n0"] and d.compute_only_composite is not None
    assert s.reschedule(now + 1) == []  # nothing wrong now
    # no forecast: still nothing to do
    s.touch()
    assert s.reschedule(now + 2) == []
    # the forecast says the home path's p95 goes from 0.5 ms to 40 ms within the horizon
    s.forecast_p95 = {(home, "store"): 40.0, (other, "store"): 0.5}
    s.forecast_version += 1
    s.touch()
    events = s.reschedule(now + 3)
    assert [(e.task_id, e.to_nodes, e.trigger) for e in events] == [("t", [other], "forecast")]
    assert events[0].before.composite < events[0].after.composite
