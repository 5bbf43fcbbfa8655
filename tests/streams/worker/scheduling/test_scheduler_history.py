"""The scheduler with what history teaches it: learned type alphas, and forecasts (preventive
rescheduling) that move a task before its path degrades."""

import dataclasses
import time

from core.vocabulary import DEFAULT_TYPES
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def scheduler(now):
    # n0 computes a little faster; both reach the store in 0.5 ms
    return make_scheduler([gpu_node("n0", now, 1000), gpu_node("n1", now, 900)],
                          {(n, "store"): {"rtt_ms": win(now, 0.5)} for n in ("n0", "n1")})


def task(**kw):
    return Task(id="t", type="training-data-parallel", resources={"cards": 1}, checkpoint_gb=1,
                expected_duration_s=7200, data_source={"node": "store", "size_gb": 1}, **kw)


def test_learned_alpha_is_the_type_default_and_an_explicit_alpha_still_wins():
    now = time.time()
    s = scheduler(now)
    assert s.decide(task(), now).alpha == DEFAULT_TYPES["training-data-parallel"].alpha
    for t in list(s.running):
        s.end(t)
    s.types = {**s.types, "training-data-parallel": dataclasses.replace(DEFAULT_TYPES["training-data-parallel"],
                                                                         alpha=0.45)}
    d = s.decide(task(), now)
    assert d.alpha == 0.45 and d.task_type == "training-data-parallel"
    for t in list(s.running):
        s.end(t)
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
