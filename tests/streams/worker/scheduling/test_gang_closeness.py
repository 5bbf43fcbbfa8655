"""The points rule (``placement_rule="points"``, before issue 52): a gang waits for nodes close to each
other rather than run across a slow network, for at most ``gang_patience`` x its expected duration
(Slurm's ``--switches=N@max-time``, on measured quality); best fit within a score band. The seconds
rule that replaced it as the default is tested in test_seconds.py."""

import math

import numpy as np
import pytest

from core.placement import closest_quality
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0


def cluster():
    """n0 <-> n1 and n2 <-> n3 are close (0.5 ms); every other pair is 150 ms apart."""
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {}
    for a in nodes:
        for b in nodes:
            if a != b:
                near = {a, b} in ({"n0", "n1"}, {"n2", "n3"})
                paths[(a, b)] = {"rtt_ms": win(NOW, 0.5 if near else 150.0)}
    s = make_scheduler([gpu_node(n, NOW) for n in nodes], paths)
    s.placement_rule = "points"
    s.node_timeout_s = float("inf")
    s.freshness = None  # the windows do not age (an hour later the paths are still known)
    return s


def task(tid, peers=1, cards=8, duration=3600.0, alpha=None):
    return Task(id=tid, type="training-data-parallel", peers=peers, resources={"cards": cards},
                submitted_at=NOW, expected_duration_s=duration, alpha=alpha)


def test_closest_quality_worked_example():
    assert closest_quality(np.array([100.0, 95.0, 60.0, 90.0]), np.ones(4, bool), 0, 2) == 92.5
    # the lead itself and nodes that could not host a worker do not count
    assert closest_quality(np.array([100.0, 95.0, 60.0, 90.0]), np.array([True, False, True, True]), 0, 2) == 75.0
    assert math.isnan(closest_quality(np.array([100.0, 95.0]), np.ones(2, bool), 0, 2))


def test_a_gang_waits_for_a_close_pair_then_takes_it():
    s = cluster()
    assert [s.decide(task(t), NOW).nodes for t in "abc"] == [["n0"], ["n1"], ["n2"]]  # whole nodes
    s.end("a")  # free: n0 and n3, 150 ms apart
    d = s.decide(task("g", peers=2), NOW + 10)
    assert d.status == "unschedulable" and d.nodes == [] and "g" in s.pending
    (why,) = [f.reason for f in d.fallbacks if "closer" in f.reason]
    # quality of the far pair against the lead's closest nodes (its rack partner, busy)
    assert why.startswith("waiting for a closer gang: its pair quality 57 < 0.8 x 100")
    w = s.waiting("g", NOW + 15)
    assert (w.reason, w.detail) == ("network", why)  # what the operator sees (GET /tasks/g/eta)
    assert s.retry_pending(NOW + 20) == []  # nothing changed: still waiting
    s.end("b")  # n1 frees: n0 <-> n1 is close
    (placed,) = s.retry_pending(NOW + 60)
    assert sorted(placed.nodes) == ["n0", "n1"] and "g" in s.running


@pytest.mark.parametrize("patience", [1.0, 0.0])
def test_a_gang_takes_a_far_pair_once_it_waited_its_patience(patience):
    s = cluster()
    s.gang_patience = patience
    s.decide(task("a"), NOW)  # n0 (the best, ties to the lower index)
    s.decide(task("b"), NOW)  # n1
    s.decide(task("c"), NOW)  # n2
    s.end("b")  # free: n1 and n3, 150 ms apart (n1's close partner n0 and n3's n2 are busy)
    d = s.decide(task("g", peers=2, duration=3600.0), NOW + 10)
    if patience == 0.0:  # patience 0: it takes them at once (the rule before)
        assert sorted(d.nodes) == ["n1", "n3"]
        return
    assert d.status == "unschedulable" and "waiting for a closer gang" in " ".join(f.reason for f in d.fallbacks)
    assert s.retry_pending(NOW + 3000) == []  # queued at NOW + 10: waited 2,990 s of its 3,600
    (placed,) = s.retry_pending(NOW + 3611)
    assert sorted(placed.nodes) == ["n1", "n3"]


def test_closeness_off_takes_any_pair():
    s = cluster()
    s.gang_closeness = 0.0
    for t in ("a", "b", "c"):
        s.decide(task(t), NOW)
    s.end("b")
    assert sorted(s.decide(task("g", peers=2), NOW).nodes) == ["n1", "n3"]


def test_a_gang_no_close_group_could_hold_does_not_wait():
    s = cluster()
    # three workers: even the lead's two closest nodes include a far one, so no placement is much
    # better than what is free now, and it goes at once
    d = s.decide(task("g", peers=3), NOW)
    assert d.status == "placed" and len(d.nodes) == 3


def test_packing_applies_only_while_other_tasks_wait():
    # n0 has twice n1's peak (composite 60 against 53.6 at alpha 0.2: within the 20-point band)
    def half_full(queued: bool):
        s = make_scheduler([gpu_node("n0", NOW, fp16=2000.0), gpu_node("n1", NOW)], {})
        s.placement_rule = "points"
        s.node_timeout_s, s.freshness = float("inf"), None
        assert s.decide(task("a"), NOW).nodes == ["n0"]
        assert s.decide(task("b", cards=4), NOW).nodes == ["n1"]  # the only room
        if queued:
            assert s.decide(task("q"), NOW).status == "unschedulable" and "q" in s.pending  # waits for a whole node
        s.end("a")  # n0 empty, n1 half full
        return s

    # nothing waits: the best score decides
    assert half_full(False).decide(task("c", cards=2, alpha=0.2), NOW + 1).nodes == ["n0"]
    # a task waits for a whole node: the fuller node within the band takes it, and n0 stays whole
    s = half_full(True)
    assert s.decide(task("c", cards=2, alpha=0.2), NOW + 1).nodes == ["n1"]
    assert s.retry_pending(NOW + 2)[0].nodes == ["n0"]
    s = half_full(True)
    s.packing_band = 0.0  # off: the best score, and the waiting task has no whole node left
    assert s.decide(task("c", cards=2, alpha=0.2), NOW + 1).nodes == ["n0"] and s.retry_pending(NOW + 2) == []
    # at its type's rule a one-node task that loads nothing is scored by compute alone (100 against 50):
    # outside the band, the faster node takes it though a task waits
    s = half_full(True)
    d = s.decide(task("c", cards=2), NOW + 1)
    assert d.nodes == ["n0"] and d.alpha == 1.0


def test_a_gangs_workers_fill_half_full_nodes_among_equals():
    # one rack of four nodes; n2 and n3 half full; every path 1.02 ms, but n0 <-> n1 measure a hair
    # better (1.0 ms: the probes' noise) — a gang of two 4-card workers goes to n2 and n3, the fullest
    # among equals, and n0 and n1 stay whole for whole-node work
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {(a, b): {"rtt_ms": win(NOW, 1.0 if {a, b} == {"n0", "n1"} else 1.02)}
             for a in nodes for b in nodes if a != b}

    def rack(band):
        s = make_scheduler([gpu_node(n, NOW) for n in nodes], paths)
        s.placement_rule = "points"
        s.node_timeout_s, s.freshness, s.gang_packing_band = float("inf"), None, band
        s.packing_band = 0.0  # the one-node fillers go by score: n0 first, so pin them
        for tid, node in (("x", "n2"), ("y", "n3")):
            d = s.decide(task(tid, cards=4, alpha=0.2), NOW, exclude=[n for n in nodes if n != node])
            assert d.nodes == [node]
        return s

    d = rack(2.0).decide(task("g", peers=2, cards=4), NOW + 1)
    assert sorted(d.nodes) == ["n2", "n3"]
    # band 0 (the rule before): the better-measured pair, two whole nodes broken
    d = rack(0.0).decide(task("g", peers=2, cards=4), NOW + 1)
    assert sorted(d.nodes) == ["n0", "n1"]
