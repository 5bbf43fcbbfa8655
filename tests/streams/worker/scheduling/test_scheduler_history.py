"""The scheduler with what history teaches it: learned type alphas, and forecasts (preventive
rescheduling) that move a task before its path degrades."""

import dataclasses
import time

import numpy as np
import pytest

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
    # the built-in rule: a one-node training task's network weighs its load's share of its time; its
    # 1 GB over the best path to the store (8 Gbit / bandwidth) before a 7,200 s run
    bw = float(np.nanmax(s.network(["store"], s.nodes(now), "bandwidth").bandwidth))
    load = 8.0 / bw
    d = s.decide(task(), now)
    assert d.alpha == pytest.approx(1 - load / (load + 7200)) and d.alpha > DEFAULT_TYPES["training-data-parallel"].alpha
    for t in list(s.running):
        s.end(t)
    # a learned default is evidence: it stands, one node or not (history.configured_types marks it)
    s.types = {**s.types, "training-data-parallel": dataclasses.replace(DEFAULT_TYPES["training-data-parallel"],
                                                                         alpha=0.45, learned=True)}
    d = s.decide(task(), now)
    assert d.alpha == 0.45 and d.task_type == "training-data-parallel"
    for t in list(s.running):
        s.end(t)
    assert s.decide(task(alpha=0.9), now).alpha == 0.9


def test_a_forecast_degradation_moves_the_task_before_the_path_degrades():
    now = time.time()
    s = scheduler(now)
    s.placement_rule = "points"  # forecasts move tasks whose paths matter all along (scored in points)
    d = s.decide(task(network_profile="latency", alpha=0.2), now)  # latency weighs rtt most; its path matters all along
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


def test_a_one_node_training_task_takes_the_faster_card_over_a_nearer_store():
    # the replay's finding (issue 30): a data job on one node, loading 500 GB once and running for a day,
    # went to the slower card because its path to the store measured better — alpha 0.2 gave that path
    # 0.8 of the score though the path costs the job its load alone (priced by the load term)
    now = time.time()
    s = make_scheduler([gpu_node("fast", now, 1500), gpu_node("slow", now, 1000)],
                       {("fast", "store"): {"rtt_ms": win(now, 20.0)}, ("slow", "store"): {"rtt_ms": win(now, 0.3)}})

    def job(tid, **kw):
        return Task(id=tid, type="training-data-parallel", resources={"cards": 8}, expected_duration_s=86400,
                    data_source={"node": "store", "size_gb": 500}, **kw)

    d = s.decide(job("day"), now)
    assert d.nodes == ["fast"] and d.alpha > 0.99
    # the same task told the type's alpha: the nearer store wins, the card 1.5x faster loses
    assert s.decide(job("told", alpha=0.2), now).nodes == ["slow"]
