"""Bounded work for a queue nothing can take (issue 15): queued tasks expire after the queue timeout
with a decision saying so, and the queue is retried only when what is free may have changed."""

import time

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def task(tid, cards):
    return Task(id=tid, type="inference", resources={"cards": cards}, expected_duration_s=600)


def test_a_queued_task_expires_after_the_timeout_with_the_reason():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("n0", "n0"): {"rtt_ms": win(now, 1.0)}})
    assert s.decide(task("big", 64), now).status == "unschedulable"  # 64 cards: no node has them
    assert list(s.pending) == ["big"]
    assert s.expire_queued(now + 99, timeout_s=100) == []  # waited 99 s of 100
    assert s.expire_queued(now + 1e6, timeout_s=0) == []  # 0: never
    ((t, d),) = s.expire_queued(now + 101, timeout_s=100)
    assert t.id == "big" and d.status == "unschedulable" and d.nodes == []
    assert d.fallbacks[0].reason.startswith("expired: queued 101 s") and "100" in d.fallbacks[0].reason
    assert (d.cards, d.peers, d.task_type) == (64, 1, "inference")
    assert s.pending == {}


def test_a_requeued_task_waits_from_when_it_was_requeued_not_from_submission():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("n0", "n0"): {"rtt_ms": win(now, 1.0)}})
    t = task("t", 4).model_copy(update={"submitted_at": now - 10_000})  # ran long before it failed
    assert s.decide(t, now).status == "placed"
    s.fail("t", now + 5, max_restarts=3)
    assert "t" in s.pending and s.expire_queued(now + 50, timeout_s=100) == []


def test_the_queue_is_retried_only_when_capacity_may_have_changed():
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("n0", "n0"): {"rtt_ms": win(now, 1.0)}})
    s.decide(task("big", 64), now)
    key = s.capacity_key()
    s.net.put(b"n0|n0", {"src": "n0", "dst": "n0", "metrics": {"rtt_ms": win(now + 10, 2.0)}})
    assert s.capacity_key() == key  # a network change moves scores, never what fits
    s.inv.put(b"n1", gpu_node("n1", now))
    assert s.capacity_key() != key  # a node (re)reported: retry
    key = s.capacity_key()
    assert s.decide(task("small", 1), now).status == "placed"
    assert s.capacity_key() != key  # an allocation: retry


def test_an_expired_task_says_the_alpha_its_decisions_carried():
    """A one-node training task (type alpha 0.2) that loads nothing is scored at alpha 1 (the one-node
    rule: no traffic between workers, no load); its expiry says so too, not the type's 0.2."""
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("n0", "n0"): {"rtt_ms": win(now, 1.0)}})
    big = Task(id="big", type="training-data-parallel", resources={"cards": 64}, expected_duration_s=600)
    d = s.decide(big, now)
    assert d.status == "unschedulable" and d.alpha == 1.0 and s.types[big.type].alpha == 0.2
    ((_, e),) = s.expire_queued(now + 101, timeout_s=100)
    assert e.alpha == d.alpha == 1.0


def test_a_requeued_task_that_expires_says_the_alpha_it_ran_with():
    """Re-queued after a failure and never decided again (nothing fits it), its expiry carries the
    alpha its run had (1.0 for a one-node training task that loads nothing), not its type's 0.2."""
    now = time.time()
    s = make_scheduler([gpu_node("n0", now)], {("n0", "n0"): {"rtt_ms": win(now, 1.0)}})
    t = Task(id="t", type="training-data-parallel", resources={"cards": 4}, expected_duration_s=600)
    assert s.decide(t, now).status == "placed" and s.running["t"].alpha == 1.0
    s.fail("t", now + 5, max_restarts=3)
    assert "t" in s.pending
    ((_, e),) = s.expire_queued(now + 500, timeout_s=100)
    assert e.alpha == 1.0
