"""Moves in seconds (streams/worker/scheduling/moves.py): a running task placed by the seconds rule moves
when the seconds it saves exceed the move's seconds, the queue's price on the card-seconds the move
holds, and 2 % of what is left (core.ect.move_gain); never onto the head of the queue's reservation;
two moves of one pass never overbook a node. Numbers by hand."""

import math

import numpy as np
import pytest

from core.ect import TRAINING_COMM_SHARE, run_seconds
from core.quality import TCP_WINDOW_BYTES
from schemas.sched import Task
from streams.worker.scheduling.queue import Reservation
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0


def cluster(fast=("n1",), nodes=("n0", "n1")):
    """8-card nodes; the ``fast`` ones at 1,500 fp16 TFLOPS against 1,000 (1.5x the card speed), every
    pair 0.5 ms apart."""
    paths = {(a, b): {"rtt_ms": win(NOW, 0.5)} for a in nodes for b in nodes if a != b}
    s = make_scheduler([gpu_node(n, NOW, fp16=1500.0 if n in fast else 1000.0) for n in nodes], paths)
    s.node_timeout_s, s.freshness = math.inf, None
    return s


def task(tid, duration, peers=1, **kw):
    kw.setdefault("alpha", 0.2)  # patience 1: it acts at its first evaluation that finds a better node
    return Task(id=tid, type="training-data-parallel", peers=peers, resources={"cards": 8}, checkpoint_gb=1,
                submitted_at=NOW, expected_duration_s=duration, **kw)


def slow_b_then_fast_frees(duration_b, ran_b, waiting=0, steps=None):
    """a (1 h) on the fast n1, b on the slow n0; ``waiting`` 3-node gangs queue (they never fit); a ends
    and the pass runs ``ran_b`` s after b was placed; ``steps``: (done, total) b's runner reported."""
    s = cluster()
    assert s.nodes(NOW).speed.tolist() == [1.0, 1.5]
    assert s.decide(task("a", 3600.0), NOW).nodes == ["n1"]
    assert s.decide(task("b", duration_b), NOW).nodes == ["n0"]
    s.start("b", ["n0"])  # its runner said it runs there
    for k in range(waiting):
        s.decide(task(f"q{k}", 3600.0, peers=3), NOW)
    assert len(s.pending) == waiting
    s.end("a")
    if steps is not None:
        s.progress("b", *steps)
    return s, s.reschedule(NOW + ran_b)


def test_a_task_moves_to_the_faster_card_when_it_pays():
    # b: 1,200 s on the slowest card, 100 s run: left 1,100 s here; there 1.5x as fast, so 1,100 x (1 - 1/1.5)
    # = 366.7 s saved; the move: 30 s save + 30 s restore + 1 GB x 8 / 400 Gbit/s = 60.02 s, and 2 % of
    # 1,100 = 22 s: required 82.02 s < 366.7 -> it moves
    s, events = slow_b_then_fast_frees(1200.0, 100.0)
    (ev,) = events
    assert (ev.task_id, ev.from_nodes, ev.to_nodes, ev.trigger) == ("b", ["n0"], ["n1"], "improvement")
    assert ev.expected_gain_s == pytest.approx(1100.0 / 3, abs=1e-3)
    assert ev.migration_cost_s == pytest.approx(60.02, abs=1e-3)
    assert s.running["b"].nodes == ["n1"] and sorted(s.ledger.nodes_of("b")) == ["n0", "n1"]  # both held until it starts


def test_a_task_nearly_done_stays():
    # 1,100 s run of 1,200: left max(100, 10 % of 1,200) = 120 s; saved 40 s against 60.02 + 2.4 = 62.4 s
    s, events = slow_b_then_fast_frees(1200.0, 1100.0)
    assert events == [] and s.running["b"].nodes == ["n0"]


def test_what_is_left_comes_from_the_runners_progress_when_it_reports_one():
    # as the first test (100 s run of 1,200: 1,100 s left by the time run, the move pays), but its runner
    # says 1,140 of 1,200 steps are done: left max(5 %, 10 %) x 1,200 = 120 s, saved 40 s < 62.4 s: it stays
    s, events = slow_b_then_fast_frees(1200.0, 100.0, steps=(1140, 1200))
    assert events == [] and s.running["b"].nodes == ["n0"]
    # 120 of 1,200 done: left 0.9 x 1,200 = 1,080 s, saved 1,080 x (1 - 1 / 1.5) = 360 s > 60.02 + 21.6: it moves
    s, events = slow_b_then_fast_frees(1200.0, 100.0, steps=(120, 1200))
    (ev,) = events
    assert ev.expected_gain_s == pytest.approx(360.0, abs=1e-3)
    # and 1,100 s run of 1,200 (nearly done by the time) but only 10 % of its steps: it moves as well
    s, events = slow_b_then_fast_frees(1200.0, 1100.0, steps=(120, 1200))
    assert [e.to_nodes for e in events] == [["n1"]]


def test_the_queues_price_on_the_move_keeps_a_task_where_it_is():
    # the same move as above, with 4 tasks waiting for 16 cards: price 4 / 16 = 0.25 s per card-second,
    # the move holds 8 cards for 60.02 s: 0.25 x 8 x 60.02 = 120.04 s more required: 60.02 + 120.04 + 22 =
    # 202.06 s < 366.7 -> it still moves; with 12 waiting (0.75): 60.02 + 360.12 + 22 = 442.14 > 366.7 -> it stays
    assert [e.to_nodes for e in slow_b_then_fast_frees(1200.0, 100.0, waiting=4)[1]] == [["n1"]]
    s, events = slow_b_then_fast_frees(1200.0, 100.0, waiting=12)
    assert events == [] and s.running["b"].nodes == ["n0"]


def test_a_move_never_lands_on_the_heads_reservation():
    s = cluster(fast=("n1", "n2"), nodes=("n0", "n1", "n2"))
    for t, n in (("a", "n1"), ("c", "n2"), ("b", "n0")):
        assert s.decide(task(t, 3600.0 if t != "b" else 20_000.0), NOW).nodes == [n]
    s.end("a")
    # n1 is promised to the head of the queue: b may not take it, and n2 is busy
    s.reservation = Reservation("head", ["n1"], NOW + 5, NOW + 3600, 0, False)
    assert s.reschedule(NOW + 10) == [] and s.running["b"].nodes == ["n0"]
    s.reservation = None
    (ev,) = s.reschedule(NOW + 11)
    assert ev.to_nodes == ["n1"]


def test_two_moves_in_one_pass_do_not_overbook_the_target():
    s = cluster(fast=("n2",), nodes=("n0", "n1", "n2"))
    for t in ("a", "b", "c"):
        s.decide(task(t, 3600.0 if t == "a" else 20_000.0), NOW)
    assert s.running["a"].nodes == ["n2"]
    s.end("a")
    events = s.reschedule(NOW + 10)
    assert [e.to_nodes for e in events] == [["n2"]]  # one of b and c; the other has no room left
    index = {"n0": 0, "n1": 1, "n2": 2}
    assert s.ledger.overbooked(index, np.full((3, 3), 1e9)) == [] and s.ledger.allocated(index, 3)[2, 0] == 8


def test_a_gang_moves_off_a_degraded_member_path_by_the_seconds_it_saves():
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {(a, b): {"rtt_ms": win(NOW, 0.5 if {a, b} == {"n0", "n1"} else 5.0)}
             for a in nodes for b in nodes if a != b}
    s = make_scheduler([gpu_node(n, NOW) for n in nodes], paths)
    s.node_timeout_s, s.freshness = math.inf, None
    d = s.decide(Task(id="g", type="training-data-parallel", peers=2, resources={"cards": 1}, checkpoint_gb=1,
                      submitted_at=NOW, expected_duration_s=7200, alpha=0.2), NOW)
    assert sorted(d.nodes) == ["n0", "n1"]
    assert s.reschedule(NOW + 1) == []  # nothing better than the 0.5 ms pair
    s.net.put(b"n0|n1", {"src": "n0", "dst": "n1", "metrics": {"rtt_ms": win(NOW + 10, 200.0, lost=10)}})
    s.net.put(b"n1|n0", {"src": "n1", "dst": "n0", "metrics": {"rtt_ms": win(NOW + 10, 200.0, lost=10)}})
    s.touch()
    (ev,) = s.reschedule(NOW + 11)
    # here: the pair 200 ms apart (window bound 64 MiB x 8 / 0.2 s); there: 5 ms (64 MiB x 8 / 5 ms, below
    # the 400 Gbit/s links); 11 s run
    here = run_seconds(7200.0, 1.0, TRAINING_COMM_SHARE, 2, 200.0, TCP_WINDOW_BYTES * 8 / 0.2 / 1e9).item()
    there = run_seconds(7200.0, 1.0, TRAINING_COMM_SHARE, 2, 5.0, TCP_WINDOW_BYTES * 8 / 0.005 / 1e9).item()
    assert here > 10 * there
    assert ev.trigger == "degradation" and not {"n0", "n1"} <= set(ev.to_nodes)
    assert ev.expected_gain_s == pytest.approx((here - 11.0) * (1 - there / here), rel=1e-6)
    assert ev.after.composite > ev.before.composite  # the display agrees
    assert s.reschedule(NOW + 12) == []  # resting after the move


def test_patience_counts_passes_that_find_the_move_worth_it():
    # alpha 0.5: patience 2 — the first pass that finds the faster card counts, the second moves
    s = cluster()
    assert s.policy.patience([0.5])[0] == 2
    s.decide(task("a", 3600.0, alpha=0.5), NOW)
    s.decide(task("b", 1200.0, alpha=0.5), NOW)
    s.end("a")
    assert s.reschedule(NOW + 100) == [] and s.running["b"].streak == 1
    (ev,) = s.reschedule(NOW + 101)
    assert ev.to_nodes == ["n1"] and s.running["b"].streak == 0
