"""Degenerate states give decisions with reasons, never an exception: no nodes, no paths, endpoints
nobody measured, every node full, nodes seen in windows that never reported, a gang larger than the
cluster."""

import time

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def task(tid, cards=1, **kw):
    return Task(id=tid, type="training-data-parallel", resources={"cards": cards}, **kw)


def test_unknown_endpoints_score_as_unknown_quality():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {})
    d = s.decide(task("t", data_source={"node": "nowhere", "size_gb": 10}, model_repo={"node": "elsewhere",
                                                                                       "size_gb": 1}), now)
    assert d.status == "placed" and d.candidates[0].network_score > 0


def test_everything_full_queues_with_a_reason_per_node():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now), gpu_node("n1", now)], {})
    assert s.decide(task("a", 8), now).status == "placed" and s.decide(task("b", 8), now).status == "placed"
    d = s.decide(task("c", 1), now)
    assert d.status == "unschedulable" and d.rejected == {"n0": "insufficient_cards", "n1": "insufficient_cards"}
    assert "c" in s.pending and s.retry_pending(now + 1) == [] and s.reschedule(now + 1) == []


def test_a_full_large_cluster_names_twenty_nodes_per_reason_and_counts_them_all():
    """A decision on 45 full nodes (and 5 with cards but too little memory) stays small: 20 nodes
    named per reason, in node order, every one counted."""
    now = time.time()
    nodes = [gpu_node(f"n{i:02d}", now, cards=1) for i in range(50)]
    s = make_scheduler(nodes, {})
    for i in range(45):
        assert s.decide(task(f"f{i}", 1), now).nodes == [f"n{i:02d}"]
    d = s.decide(Task(id="big", type="training-data-parallel", resources={"cards": 1, "host_mem_gb": 10_000}), now)
    assert d.status == "unschedulable"
    assert d.rejected_counts == {"insufficient_cards": 45, "insufficient_host_memory": 5}
    assert list(d.rejected) == [f"n{i:02d}" for i in range(20)] + [f"n{i}" for i in range(45, 50)]


def test_nodes_in_windows_that_never_reported_are_not_candidates():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("ghost", "n0"): {"rtt_ms": win(now, 1.0)},
                                               ("n0", "ghost2"): {"rtt_ms": win(now, 1.0, lost=100)}})
    d = s.decide(task("t"), now)
    assert d.nodes == ["n0"] and {c.node for c in d.candidates} == {"n0"}
    assert s.watch(now) == []  # n0 has one lost path of two known: not a network failure


def test_a_gang_larger_than_the_cluster_is_answered():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now), gpu_node("n1", now)], {})
    d = s.decide(task("g", 1, peers=3), now)
    assert d.status == "unschedulable" and d.fallbacks[-1].reason.startswith("gang incomplete: 2 of 3")
    assert s.ledger.tasks() == []
