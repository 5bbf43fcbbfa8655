"""A node that refuses a task, or where it fails to start, hands it to the next candidate (issue 12,
finding 6): each attempt is a decision with the refusal in its fallbacks; after max_fallbacks nodes
the task waits in the queue. A failure after the start is a restart instead. On 6fdafa7 a failed
start ended the task for good."""

import time

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NODES = ("n0", "n1", "n2")


def world(now):
    # n0 has the best path to the data, then n1, then n2
    paths = {(n, "store"): {"rtt_ms": win(now, p95)} for n, p95 in zip(NODES, (0.3, 3.0, 30.0), strict=True)}
    return make_scheduler([gpu_node(n, now) for n in NODES], paths)


def beat(s, t):
    """Every node reports at t (their heartbeat)."""
    for n in NODES:
        s.inv.put(n.encode(), gpu_node(n, t))


def job():
    return Task(id="j", type="training-data-parallel", resources={"cards": 2}, alpha=0.2,  # its data path matters all along (alpha given: the one-node rule would raise it)
                data_source={"node": "store", "size_gb": 1})


def test_refusals_walk_down_the_ranking_then_the_task_queues():
    now = time.time()
    s = world(now)
    assert s.decide(job(), now).nodes == ["n0"]
    d = s.refuse("j", "refused", now + 1, max_fallbacks=2)
    assert d.nodes == ["n1"] and [(f.node, f.reason) for f in d.fallbacks] == [("n0", "refused")]
    assert s.ledger.nodes_of("j") == ["n1"]
    d = s.refuse("j", "failed_at_start", now + 2, max_fallbacks=2)
    assert d.nodes == ["n2"] and d.fallbacks[0].node == "n1" and s.running["j"].refused == ["n0", "n1"]
    d = s.refuse("j", "refused", now + 3, max_fallbacks=2)  # three nodes tried: queued
    assert d.status == "unschedulable" and d.rejected_counts == {"refused": 3} and "j" in s.pending
    assert s.ledger.tasks() == []


def test_a_started_task_is_not_handed_on():
    now = time.time()
    s = world(now)
    s.decide(job(), now)
    s.start("j", ["n0"])
    assert s.refuse("j", "failed_at_start", now + 1, max_fallbacks=3) is None
    assert s.running["j"].nodes == ["n0"]
    assert s.fail("j", now + 2, max_restarts=3) is not None and "j" in s.pending  # a restart instead


def test_a_start_that_never_comes_times_out_to_the_next_candidate():
    now = time.time()
    s = world(now)
    s.decide(job(), now)
    assert s.expire_starts(now + 299, 300.0, 3) == []  # not late yet
    beat(s, now + 301)
    (d,) = s.expire_starts(now + 301, 300.0, 3)
    assert d.nodes == ["n1"] and (d.fallbacks[0].node, d.fallbacks[0].reason) == ("n0", "start_timeout")
    s.start("j", ["n1"])
    assert s.expire_starts(now + 1000, 300.0, 3) == [] and s.expire_starts(now + 1000, 0.0, 3) == []
    assert s.task_of("j").id == "j" and s.task_of("nope") is None


def _degrade_home(s, now):
    for n, p95 in zip(NODES, (300.0, 0.3, 30.0), strict=True):
        s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(now, p95, lost=10)}})
    s.touch()


def _moved(now):
    """A task started on n0 whose home paths degrade: the reschedule event moving it."""
    s = world(now)
    s.placement_rule = "points"  # moved on its home paths' scores (test_moves: the same books in seconds)
    s.decide(job(), now)
    s.start("j", ["n0"])
    _degrade_home(s, now + 10)
    (ev,) = s.reschedule(now + 11)
    return s, ev


def test_a_move_holds_both_ends_until_the_task_starts_at_the_target():
    now = time.time()
    s, ev = _moved(now)
    assert ev.to_nodes == ["n1"] and sorted(s.ledger.nodes_of("j")) == ["n0", "n1"]  # both held
    # the 11 s it ran on n0 still count towards its expected duration at n1
    r = s.running["j"]
    assert (r.ran_s, r.placed_at, r.ran_for(now + 20)) == (11.0, now + 11, 20.0)
    s.start("j", ["n1"])
    assert s.ledger.nodes_of("j") == ["n1"]  # the source is free once it runs at the target


def test_a_move_that_never_starts_rolls_back():
    now = time.time()
    s, ev = _moved(now)
    beat(s, now + 400)
    (back,) = s.expire_starts(now + 400, 300.0, 3)
    assert (back.trigger, back.from_nodes, back.to_nodes) == ("rollback", ["n1"], ["n0"])
    assert s.ledger.nodes_of("j") == ["n0"] and s.running["j"].nodes == ["n0"] and s.running["j"].started
    # a refusal at the target during a move rolls back too
    beat(s, now + 1000)
    _degrade_home(s, now + 1000)
    s.running["j"].cooldown_until = 0
    (ev,) = s.reschedule(now + 1001)
    assert s.refuse("j", "refused", now + 1002, 3) is None  # not a fallback: a rollback
    assert s.roll_back("j", now + 1002).to_nodes == ["n0"] and s.ledger.nodes_of("j") == ["n0"]
