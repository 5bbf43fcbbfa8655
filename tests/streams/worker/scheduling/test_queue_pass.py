"""The queue retry in arrays (queue.py: held.Facts, the pending book, _ordered, _behind_all) against the per-task
rules it replaced: each queued task's wait (deadlines kept), the service order, and whether the head's
reservation holds it back — over priorities, durations, deadlines and starving heads. Then a whole retry
of a long mixed queue places what a plain first-fit walk of the same order says it can."""

import numpy as np
import pytest

from core.quota import deadline_wait, queue_order
from core.reservation import held_back
from schemas.sched import Task
from streams.worker.scheduling.held import Pending, slack_s
from streams.worker.scheduling.queue import Reservation
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def queue(seed: int, n: int = 60) -> dict[str, Pending]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        deadline = None if rng.random() < 0.6 else float(NOW + rng.uniform(-100, 20_000))
        t = Task(id=f"t{i}", type="inference", resources={"cards": int(rng.integers(1, 9))}, submitted_at=NOW,
                 priority=int(rng.integers(0, 4)) * 25, expected_duration_s=float(rng.choice([60, 600, 3600, 7200])),
                 deferrable_until=deadline)
        out[t.id] = Pending(t, NOW - float(rng.uniform(0, 2000)))
    return out


def scheduler(pending):
    s = make_scheduler([gpu_node(f"n{i}", NOW) for i in range(2)], {})
    s.node_timeout_s = float("inf")
    s.pending.update(pending)
    return s


@pytest.mark.parametrize("rule", ["fifo", "response"])
@pytest.mark.parametrize("seed", range(5))
def test_the_wait_and_the_order_are_the_per_task_ones(seed, rule):
    s = scheduler(queue(seed))
    s.queue_rule = rule
    rows, order, starving = s._ordered(s.nodes(NOW), NOW)
    items = list(s.pending.entries[rows])
    assert items == list(s.pending.values())  # none held: every entry, in the dict's order
    # the plain composition: slack_s and the wait task by task, then the order
    slack = [slack_s(p.task, 0.0, NOW) for p in items]
    ref_wait = deadline_wait(np.array([NOW - p.submitted_at for p in items]), np.array(slack), s.max_wait_s)
    # under "response" a task whose deadline is near runs no time: it starves from the longest wait on
    run = None if rule == "fifo" else np.array([0.0 if d <= s.max_wait_s else p.task.expected_duration_s
                                                for p, d in zip(items, slack, strict=True)])
    ref_starving = [w >= s.max_wait_s and (run is None or w >= r)
                    for w, r in zip(ref_wait, ref_wait if run is None else run, strict=True)]
    assert starving.tolist() == ref_starving
    assert np.array_equal(order, queue_order(np.array([p.task.priority for p in items]), np.zeros(len(items)),
                                             ref_wait, s.max_wait_s, run))
    assert any(ref_starving) and not all(ref_starving)  # both kinds are in it
    assert s.pending.order[rows, 0].tolist() == [p.task.priority for p in items]


@pytest.mark.parametrize("starving", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_held_back_by_the_reservation_is_the_per_task_rule(seed, starving):
    pending = queue(seed)
    s = scheduler(pending)
    head = pending["t0"]
    s.reservation = Reservation("t0", ["n0"], NOW + 1800.0, NOW + 5400.0, 50, starving)
    rows, _, _ = s._ordered(s.nodes(NOW), NOW)
    items, facts = list(s.pending.entries[rows]), s.pending.order[rows]
    got = s._behind_all(facts, NOW)
    want = np.array([s._behind(p.task, NOW) for p in items])
    others = np.array([p is not head for p in items])
    assert np.array_equal(got[others], want[others])
    # the rule itself, written out: lower-or-equal priority (any while the head starves) that would
    # not end by the reservation's start
    ref = np.array([(starving or p.task.priority <= 50) and held_back(NOW + 1800.0, NOW, p.task.expected_duration_s)
                    for p in items])
    assert np.array_equal(got[others], ref[others]) and got.any() and not got.all()
    s.reservation = Reservation("gone", ["n0"], NOW + 1800.0, NOW + 5400.0, 50, starving)  # its task left
    assert not s._behind_all(facts, NOW).any()


def test_a_new_task_object_refreshes_the_facts():
    p = Pending(Task(id="a", type="inference", resources={"cards": 2}, priority=10), NOW)
    assert p.facts().order[0] == 10.0 and p.facts().shape == ((2.0, 0.0, 0.0), 1)
    p.task = p.task.model_copy(update={"priority": 90, "deferrable_until": NOW + 50})
    assert p.facts().order[0] == 90.0 and p.facts().order[2] == NOW + 50
    with pytest.raises(ValueError):
        p.need()[0] = 5  # shared: read-only


def test_a_retry_of_a_long_queue_places_in_order_what_fits():
    """Two free 8-card nodes, a queue of one-card to eight-card tasks of one priority in wait order:
    first come, first placed while cards last, and a task that no longer fits once the ones before it
    took their cards is left queued, undecided. The next retry finds nothing fits: its first task
    holds the reservation."""
    s = scheduler({})
    cards = [4, 4, 8, 2, 1, 8, 1, 3]
    for i, c in enumerate(cards):
        t = Task(id=f"q{i}", type="inference", resources={"cards": c}, submitted_at=NOW - 100 + i,
                 expected_duration_s=600)
        s.pending[t.id] = Pending(t, NOW - 100 + i)
    placed = s.retry_pending(NOW)
    assert sorted(d.task_id for d in placed) == ["q0", "q1", "q2"]  # q0 and q1 fill one node, q2 the other
    assert s.reservation is None  # every task fitted when the pass began
    assert set(s.pending) == {"q3", "q4", "q5", "q6", "q7"}
    assert s.retry_pending(NOW + 1) == []
    assert s.reservation is not None and s.reservation.task_id == "q3"  # first in line, nothing fits


def test_the_running_tasks_for_the_reservation_are_the_per_task_ones_and_follow_the_books():
    s = make_scheduler([gpu_node(f"n{i}", NOW) for i in range(4)], {})
    s.node_timeout_s = float("inf")
    for i, (cards, peers, hours) in enumerate([(8, 2, 1.0), (3, 1, 2.0), (2, 1, 0.5), (1, 1, 4.0)]):
        t = Task(id=f"r{i}", type="training-data-parallel", resources={"cards": cards}, peers=peers,
                 submitted_at=NOW, expected_duration_s=hours * 3600)
        assert s.decide(t, NOW + i).status == "placed"
    nodes = s.nodes(NOW + 10)
    at, per, ran_s, placed_at, expected, needs = s.running.placements(nodes.index)
    runs = list(s.running.values())
    assert at.tolist() == [nodes.index[n] for r in runs for n in r.nodes] and per.tolist() == [len(r.nodes) for r in runs]
    assert per.tolist() == [2, 1, 1, 1] and expected.tolist() == [3600.0, 7200.0, 1800.0, 14400.0]
    assert placed_at.tolist() == [NOW, NOW + 1, NOW + 2, NOW + 3] and ran_s.tolist() == [0.0] * 4
    assert needs[:, 0].tolist() == [8, 8, 3, 2, 1]  # per node row: the gang's two, then one each
    s.end("r1")
    at2, per2, *_ = s.running.placements(s.nodes(NOW + 11).index)
    assert per2.tolist() == [2, 1, 1] and len(at2) == 4  # an end leaves the book

