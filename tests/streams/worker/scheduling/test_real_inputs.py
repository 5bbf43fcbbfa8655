"""Decisions on inputs shaped as real machines send them (issue 27): nodes that report their free cards
with reports of varying age, probes that stop, racks named alike in two sites, failures with no room."""

import time

import numpy as np

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def full(node: str, now: float, age_s: float, **extra) -> dict:
    """An 8-card node's report as a real reporter sends it: ``free`` present, received ``age_s`` ago."""
    return gpu_node(node, now - age_s, free={"cards": 8, "mem_gb": 640, "host_mem_gb": 1024}, **extra)


def dp(tid: str, cards: int = 8, **kw) -> Task:
    kw.setdefault("alpha", 0.2)  # its data path matters all along (alpha given: the one-node rule would raise it)
    return Task(id=tid, type="training-data-parallel", resources={"cards": cards}, **kw)


def test_empty_nodes_reporting_free_cards_take_whole_node_jobs_at_any_report_age():
    # finding 1: an 8-card node reporting free.cards = 8 offered 7 cards once its report was a second old
    now = time.time()
    s = make_scheduler([full("a", now, 1.5), full("b", now, 40.0)], {})
    got = [s.decide(dp(t), now) for t in ("t1", "t2", "t3")]
    assert sorted(n for d in got[:2] for n in d.nodes) == ["a", "b"]
    assert got[2].status == "unschedulable" and got[2].rejected == {"a": "insufficient_cards",
                                                                    "b": "insufficient_cards"}
    assert "t3" in s.pending  # waits with its reason


def test_a_probe_that_stops_ages_into_unknown():
    # finding 3: node a's path to the data was excellent (0.3 ms) but its probe stopped 10 minutes ago;
    # node b's path is fresh and fair (20 ms). The stale path is unknown (50), never its last good value.
    now = time.time()
    paths = {("a", "store"): {"rtt_ms": win(now - 600, 0.3)}, ("b", "store"): {"rtt_ms": win(now, 20.0)}}
    s = make_scheduler([gpu_node("a", now), gpu_node("b", now)], paths)
    task = dp("t", 1, data_source={"node": "store", "size_gb": 0})
    d = s.decide(task, now)
    assert d.nodes == ["b"]
    nodes = s.nodes(now)
    table = s.path_table(nodes, "bandwidth")
    q = table.gather("q", ["store"], 2)[0]
    assert np.isnan(q[nodes.index["a"]]) and q[nodes.index["b"]] > 50
    assert np.isnan(table.gather("p95", ["store"], 2)[0][nodes.index["a"]])  # not judged by what it last said
    # 3 minutes old (fresh 60 s, stale 300 s): confidence 0.5, half way to unknown
    s.net.put(b"a|store", {"src": "a", "dst": "store", "metrics": {"rtt_ms": win(now - 180, 0.3)}})
    fresh = make_scheduler([gpu_node("a", now)], {("a", "store"): {"rtt_ms": win(now, 0.3)}})
    n1 = fresh.nodes(now)
    q_fresh = float(fresh.path_table(n1, "bandwidth").gather("q", ["store"], 1)[0][0])
    nodes = s.nodes(now)
    q_aged = float(s.path_table(nodes, "bandwidth").gather("q", ["store"], 2)[0][nodes.index["a"]])
    # the table ages in steps of (300 - 60) / 20 = 12 s: an age of 168-180 s, confidence 0.55-0.5
    assert 50 + 0.5 * (q_fresh - 50) - 1e-3 <= q_aged <= 50 + 0.55 * (q_fresh - 50) + 1e-3


def _fail_node(s, node: str, others: list[str], at: float) -> None:
    """``node`` stops reporting; the others report at ``at``."""
    for n in others:
        s.inv.put(n.encode(), full(n, at, 0.0))


def test_a_task_on_a_failed_node_with_no_room_elsewhere_is_requeued_and_its_incident_mitigated():
    # finding 2: the task stayed booked on the dead node, was never re-queued, its incident never closed
    now = time.time()
    s = make_scheduler([full("a", now, 0.0), full("b", now, 0.0)], {})
    assert s.decide(dp("t", checkpoint_gb=1), now).nodes == ["a"]
    assert s.decide(dp("other"), now).nodes == ["b"]
    s.checkpoint("t", now + 30)
    later = now + 120
    _fail_node(s, "a", ["b"], later)
    (opened,) = s.watch(later)
    assert opened.status == "open" and opened.tasks == ["t"]
    assert s.reschedule(later) == []  # nowhere to move
    (d,) = s.recover(later)
    assert d.task_id == "t" and d.status == "unschedulable" and d.resume_from == now + 30
    assert d.fallbacks[0].node == "a" and d.fallbacks[0].reason.startswith("node_failed: released and re-queued")
    assert "t" in s.pending and "t" not in s.running and s.ledger.nodes_of("t") == []
    (closed,) = s.watch(later + 1)
    assert closed.status == "mitigated" and closed.outcomes == {"t": "queued"}
    assert not s.incidents.unmitigated() and list(s.incidents.open) == ["a"]  # open until a is back
    # b frees: the queued task resumes from its checkpoint there
    s.end("other")
    (placed,) = s.retry_pending(later + 2)
    assert placed.nodes == ["b"] and placed.resume_from == now + 30


def test_a_task_on_a_failed_node_may_preempt_work_it_outranks_and_the_incident_says_so():
    now = time.time()
    s = make_scheduler([full("a", now, 0.0), full("b", now, 0.0)], {})
    assert s.decide(dp("t", priority=9, preempts=True), now).nodes == ["a"]
    assert s.decide(dp("low", priority=1), now).nodes == ["b"]
    later = now + 120
    _fail_node(s, "a", ["b"], later)
    s.watch(later)
    assert s.reschedule(later) == []
    (d,) = s.recover(later)
    assert d.nodes == ["b"] and [p.task_id for p in s.preemptions] == ["low"] and "low" in s.pending
    (closed,) = s.watch(later + 1)
    assert closed.outcomes == {"t": "placed on b (preempting low)"}


def test_a_deferrable_task_rises_in_the_queue_as_its_deadline_nears_and_is_not_preempted_past_it():
    # finding 9: deferrable_until was read as a flag only
    from core.quota import deadline_wait

    # worked (max wait 600 s): slack 100 s, waited 30 -> 1,100 (starving); slack 700 -> 30; none -> 30
    assert deadline_wait(np.array([30.0, 30.0, 30.0, 1000.0]), np.array([100.0, 700.0, np.nan, np.nan]),
                         600.0).tolist() == [1100.0, 30.0, 30.0, 1000.0]
    now = time.time()
    s = make_scheduler([full("a", now, 0.0)], {})
    s.decide(dp("run"), now)
    # both wait; the deferrable one is due (deadline in 1 h 05, needs 1 h): it goes first, though its
    # priority is lower and it came later
    s.decide(dp("urgent-number", priority=90, submitted_at=now), now)
    s.decide(dp("due", priority=10, submitted_at=now + 5, deferrable_until=now + 3900,
                expected_duration_s=3600), now + 5)
    s.end("run")
    (placed,) = s.retry_pending(now + 10)
    assert placed.task_id == "due"
    # now running with 5 min of slack: a preempting task may not pause it
    d = s.decide(dp("boss", priority=100, preempts=True), now + 20)
    assert d.status == "unschedulable" and not s.preemptions


def test_a_node_keeps_its_first_seen_time_in_its_record():
    # finding 9: first_seen lived in memory, so after a restart every node looked newly joined
    now = time.time()
    rec = {**gpu_node("a", now), "first_seen_at": now - 86_400}
    s = make_scheduler([rec], {})  # a restarted scheduler: its memory is empty, the record is not
    nodes = s.nodes(now)
    assert nodes.joined_at[0] == now - 86_400


def test_a_moves_cost_counts_the_targets_headroom_the_measured_save_and_restore_and_the_data_reload():
    # finding 6: fixed 30 s + 30 s, no data reload, and the source's NIC headroom for single tasks
    now = time.time()
    paths = {("a", "store"): {"rtt_ms": win(now, 0.5)}, ("b", "store"): {"rtt_ms": win(now, 40.0)}}
    s = make_scheduler([gpu_node("a", now), gpu_node("b", now)], paths)
    s.placement_rule = "points"  # its data path decides (in seconds a load done once is done: test_moves)
    d = s.decide(dp("t", 4, checkpoint_gb=100, expected_duration_s=86_400,
                    data_source={"node": "store", "size_gb": 50}), now)
    assert d.nodes == ["a"]
    s.start("t", ["a"])
    s.checkpoint("t", now + 5, save_s=12.0)
    s.running["t"].restore_s = 8.0  # measured at its last resume
    # a's path to the data collapses and its NIC is 90 % busy; b's path becomes the best, its NIC half busy
    for n, util in (("a", 0.9), ("b", 0.5)):
        s.net.put(f"{n}|".encode(), {"src": n, "dst": "", "metrics": {"bw_util": {**win(now + 10, 0.0), "mean": util}}})
    s.net.put(b"a|store", {"src": "a", "dst": "store", "metrics": {"rtt_ms": win(now + 10, 400.0, lost=30)}})
    s.net.put(b"b|store", {"src": "b", "dst": "store", "metrics": {"rtt_ms": win(now + 10, 0.5)}})
    (ev,) = s.reschedule(now + 11)
    assert ev.to_nodes == ["b"]
    # checkpoint 100 GB over min(400, 400) Gbit/s x b's headroom 0.5 = 200 -> 4 s (a's 0.1 gave 20 s);
    # data 50 GB from the store (10 Gbit/s default link) x b's headroom 0.5 = 5 Gbit/s -> 80 s;
    # 12 s save + 4 + 8 s restore + 80 = 104 s
    assert ev.migration_cost_s == 104.0
