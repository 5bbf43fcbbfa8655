"""Quotas in the scheduler: borrowing idle cards, the maximum, reclaiming borrowed cards by preemption
(victims that lose least, resumed from their checkpoint), priority preemption, and the fair-share
order of the queue — with the numbers worked out."""

import numpy as np
import pytest

from schemas.quota import Quota, QuotaSet
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def cluster():
    """Three 8-card nodes (24 cards); research is guaranteed 8 and may hold 16, prod is guaranteed 16."""
    s = make_scheduler([gpu_node(n, NOW) for n in ("n1", "n2", "n3")], {})
    s.node_timeout_s = float("inf")  # the reports stay fresh however long the test's clock runs
    s.quotas.replace(QuotaSet(quotas=[Quota(team="research", guaranteed_cards=8, max_cards=16),
                                      Quota(team="prod", guaranteed_cards=16)]))
    return s


def started(s):
    """Every placed task started, as its runner says (work is lost only where it ran)."""
    for tid, r in list(s.running.items()):
        s.start(tid, r.nodes)


def task(tid, team, cards=8, priority=50, kind="training-data-parallel", preempts=False):
    return Task(id=tid, type=kind, team=team, priority=priority, resources={"cards": cards}, submitted_at=NOW,
                preempts=preempts)


def test_borrow_idle_cards_then_reclaim_them_from_the_task_that_loses_least():
    s = cluster()
    assert s.decide(task("r1", "research"), NOW).status == "placed"  # within its guarantee of 8
    assert s.decide(task("r2", "research"), NOW + 10).status == "placed"  # 16: 8 borrowed from prod's idle cards
    assert s.decide(task("p1", "prod"), NOW + 20).status == "placed"  # the last free node; prod holds 8 of 16
    started(s)
    s.checkpoint("r1", NOW + 500)
    s.checkpoint("r2", NOW + 900)
    # prod needs 8 more, within its guarantee: it reclaims r2 (the borrowed one, placed after r1 had
    # filled research's guarantee), never r1 (within research's guarantee), whatever they would lose
    d = s.decide(task("p2", "prod"), NOW + 1000)
    r2_node = d.nodes
    assert d.status == "placed" and "r2" not in s.running and "r1" in s.running
    (p,) = s.preemptions
    assert (p.task_id, p.by, p.reason, p.team) == ("r2", "p2", "reclaim", "research")
    # r2 loses the 100 s since its checkpoint at +900, on 8 cards: 800 card-seconds
    assert p.work_lost_s == pytest.approx(100.0) and p.card_seconds_lost == pytest.approx(800.0)
    assert p.nodes == r2_node
    # r2 waits in the queue to resume from that checkpoint; a preemption is no restart
    q = s.pending["r2"]
    assert q.resume_from == NOW + 900 and q.restarts == 0


def test_the_maximum_holds_even_with_free_cards():
    s = cluster()
    for k in range(2):
        assert s.decide(task(f"r{k}", "research"), NOW).status == "placed"
    d = s.decide(task("r2", "research"), NOW)  # research holds 16 of its 16; 8 cards are free
    assert d.status == "unschedulable" and d.rejected_counts == {"team_quota_exceeded": 1, "insufficient_cards": 2}
    assert not s.preemptions


def test_an_urgent_task_preempts_lower_priority_work_of_its_team_not_others_quota():
    s = cluster()
    s.decide(task("r1", "research", priority=30), NOW)
    s.decide(task("p1", "prod", priority=10), NOW)
    s.decide(task("p2", "prod", priority=10), NOW)
    started(s)
    # an urgent research task (90): research holds 8 = its guarantee, so it does not reclaim; prod's
    # work is within prod's guarantee (16), so its low priority does not matter: only r1 may go
    d = s.decide(task("r-urgent", "research", priority=90, kind="inference"), NOW + 60)
    assert d.status == "placed" and [p.task_id for p in s.preemptions] == ["r1"]
    assert s.preemptions[0].reason == "priority" and s.preemptions[0].work_lost_s == pytest.approx(60.0)
    # equal priority takes nothing
    d = s.decide(task("r-other", "research", priority=30), NOW + 70)
    assert d.status == "unschedulable" and len(s.preemptions) == 1


def test_without_quotas_priority_decides_for_tasks_that_opt_in_and_preemption_can_be_off():
    s = make_scheduler([gpu_node("n1", NOW)], {})
    s.decide(task("low", "", priority=10), NOW)
    # issue 27 finding 9: a higher number alone no longer preempts a long run without quotas
    assert s.decide(task("high0", "", priority=90), NOW).status == "unschedulable" and not s.preemptions
    s.preemption = False
    assert s.decide(task("high", "", priority=90, preempts=True), NOW).status == "unschedulable"
    s.preemption = True
    assert s.decide(task("high2", "", priority=90, preempts=True), NOW + 1).status == "placed"
    assert s.preemptions[0].task_id == "low"
    # a priority class opts in: from CNSCHED_PREEMPTION_PRIORITY up
    s = make_scheduler([gpu_node("n1", NOW)], {})
    s.decide(task("low", "", priority=10), NOW)
    s.preemption_priority = 80
    assert s.decide(task("mid", "", priority=70), NOW + 3).status == "unschedulable"
    assert s.decide(task("high3", "", priority=85), NOW + 3).status == "placed"


def test_a_team_no_quota_names_is_placed_nowhere():
    s = cluster()
    d = s.decide(task("x", "marketing"), NOW)
    assert d.status == "unschedulable" and d.rejected_counts == {"team_quota_exceeded": 3}


def test_the_queue_serves_the_team_with_the_smaller_share_first():
    s = cluster()
    s.decide(task("r1", "research"), NOW)
    s.decide(task("r2", "research"), NOW)
    s.decide(task("p1", "prod"), NOW)  # full: research holds 16 of 24 (0.67), prod 8 (0.33)
    s.preemption = False
    for tid, team in (("r3", "research"), ("p3", "prod")):  # research asked first
        assert s.decide(task(tid, team, cards=4), NOW + 1).status == "unschedulable"
    s.end("p1")  # 8 cards free: room for one of them... both fit (4 + 4); make it room for one
    s.decide(task("filler", "prod", cards=4), NOW + 2)
    placed = s.retry_pending(NOW + 3)
    assert [d.task_id for d in placed] == ["p3"]  # prod's share (4/24) is below research's (16/24)
    shares = s.quotas.shares([task("a", "research"), task("b", "prod"), task("c", "nobody")],
                             list(s.running.values()), s.nodes(NOW))
    np.testing.assert_allclose(shares, [16 / 24, 8 / 24, 0.0])


@pytest.mark.parametrize("rule", ["fifo", "response"])
def test_the_head_of_the_queue_gets_a_reservation_and_backfill_cannot_delay_it(rule):
    s = make_scheduler([gpu_node(n, NOW) for n in ("n1", "n2")], {})
    s.node_timeout_s = float("inf")
    s.preemption = False
    # by response ratio long2 (500 s) would overtake head (1,000 s) at +100: the holder keeps its place
    s.queue_rule = rule

    def t(tid, cards, duration, priority=50):
        return Task(id=tid, type="fine-tune", priority=priority, resources={"cards": cards},
                    expected_duration_s=duration, submitted_at=NOW)

    # n1: a 6-card task expected to end at +100; n2: a 6-card task expected to end at +300
    assert s.decide(t("a", 6, 100), NOW).nodes == ["n1"]
    assert s.decide(t("b", 6, 300), NOW).nodes == ["n2"]
    assert s.decide(t("head", 8, 1000), NOW + 1).status == "unschedulable"  # queued
    assert s.retry_pending(NOW + 2) == []
    r = s.reservation
    # n1 frees first: a's 6 cards at +100 (it ran 2 s of its 100 by then: ends at NOW + 2 + 98)
    assert (r.task_id, r.nodes, r.start, r.end) == ("head", ["n1"], NOW + 100, NOW + 1100)
    # backfill: 2 cards for 50 s end before +100: n1 is fine (it ranks first: the lower index)
    assert s.decide(t("short", 2, 50), NOW + 2).nodes == ["n1"]
    # 2 cards for 500 s would hold n1 past +100: n2 it is
    assert s.decide(t("long", 2, 500), NOW + 2).nodes == ["n2"]
    # short is done; another long one: n2 is full, n1's 2 free cards are held -> it waits, saying why
    s.end("short")
    d = s.decide(t("long2", 2, 500), NOW + 3)
    assert d.status == "unschedulable" and d.rejected == {"n1": "reserved_for_queue_head", "n2": "insufficient_cards"}
    # a higher priority is ahead of the head: not held back by its reservation
    assert s.decide(t("urgent", 2, 500, priority=90), NOW + 2).nodes == ["n1"]
    # the head is placed once a ends (and urgent); the reservation goes with it
    s.end("a")
    s.end("urgent")
    placed = s.retry_pending(NOW + 100)
    assert [d.task_id for d in placed] == ["head"] and s.running["head"].nodes == ["n1"] and s.reservation is None


def test_tidal_lending_to_deferrable_tasks_and_reclaim_before_the_peak():
    from streams.worker.scheduling.preemption import tidal_reclaim

    s = make_scheduler([gpu_node(n, NOW) for n in ("n1", "n2", "n3")], {})
    s.node_timeout_s = float("inf")
    # 24 cards: serving is guaranteed 16, lent out in its troughs (tidal); training 8, at most 24
    s.quotas.replace(QuotaSet(quotas=[Quota(team="serving", guaranteed_cards=16, tidal=True),
                                      Quota(team="training", guaranteed_cards=8, max_cards=24)]))
    assert s.decide(task("t1", "training"), NOW).status == "placed"  # its own 8
    # 8 more, not deferrable: 16 free less these 8 would leave 8, but serving's idle 16 must stay free
    d = s.decide(task("t2", "training"), NOW)
    assert d.status == "unschedulable" and d.rejected_counts == {"team_quota_exceeded": 2, "insufficient_cards": 1}
    # a deferrable task may borrow serving's idle cards
    deferrable = task("t3", "training").model_copy(update={"deferrable_until": NOW + 86_400})
    assert s.decide(deferrable, NOW).status == "placed"
    started(s)
    s.checkpoint("t3", NOW + 500)
    # serving is forecast to need 8 soon: 8 cards are free, nothing to take back
    s.tidal_forecast = {"serving": 8.0}
    assert tidal_reclaim(s, NOW + 600) == []
    # 16: 8 short -> the deferrable borrower goes, at its checkpoint (100 s of work lost)
    s.tidal_forecast = {"serving": 16.0}
    (p,) = tidal_reclaim(s, NOW + 600)
    assert (p.task_id, p.by, p.reason, p.work_lost_s) == ("t3", "tidal:serving", "tidal", pytest.approx(100.0))
    assert "t3" in s.pending and s.pending["t3"].resume_from == NOW + 500 and "t1" in s.running
    assert tidal_reclaim(s, NOW + 601) == []  # room made: nothing more


@pytest.mark.parametrize("rule", ["fifo", "response"])
def test_a_starving_task_holds_its_reservation_against_any_priority(rule):
    s = make_scheduler([gpu_node(n, NOW) for n in ("n1", "n2")], {})
    s.node_timeout_s = float("inf")
    s.preemption = False
    s.queue_rule = rule

    def t(tid, cards, duration, priority=50, submitted=NOW):
        return Task(id=tid, type="fine-tune", priority=priority, resources={"cards": cards},
                    expected_duration_s=duration, submitted_at=submitted)

    s.decide(t("a", 6, 100), NOW)
    s.decide(t("b", 6, 300), NOW)
    # a low-priority task that has waited past CNSCHED_MAX_WAIT_SECONDS (600) and its predicted run
    # (1,000 s): it goes first and holds n1 from +100 (a ends) against everyone, whatever their priority
    s.decide(t("old", 8, 1000, priority=10, submitted=NOW - 1100), NOW)
    s.retry_pending(NOW)
    assert (s.reservation.task_id, s.reservation.nodes, s.reservation.starving) == ("old", ["n1"], True)
    d = s.decide(t("urgent", 2, 500, priority=90), NOW + 1)  # would hold n1 past +100: n2 only
    assert d.nodes == ["n2"]
    d = s.decide(t("urgent2", 2, 500, priority=90), NOW + 1)
    assert d.status == "unschedulable" and d.rejected["n1"] == "reserved_for_queue_head"


def test_a_waiting_task_of_a_team_no_quota_names_says_so_and_the_team_gauges_add_up():
    """Issue 51, finding 7: quotas named after a task of another team queued: it waits saying its team
    has no quota (it said "would exceed its maximum cards", for a 0-card task too), and the per-team
    queued gauges count it under "(no quota)", so that they add up to the queue."""
    from streams.metrics import Counters
    from streams.worker.scheduling import gauges

    s = make_scheduler([gpu_node("n1", NOW)], {})
    s.node_timeout_s = float("inf")
    assert s.decide(task("a", "research"), NOW).status == "placed"
    assert s.decide(task("o", "others", cards=0), NOW).status == "placed"
    s.decide(task("q", "others"), NOW)  # no room: queued
    s.decide(task("r", "research"), NOW)
    s.quotas.replace(QuotaSet(quotas=[Quota(team="research", guaranteed_cards=8)]))
    s.books_changed()
    w = s.waiting("q", NOW)
    assert (w.reason, w.detail) == ("quota", "team others has no quota: the quota set names research (add others "
                                              "to it, or submit under one of them)")
    c = Counters()
    gauges.quotas(c, s)
    assert c.get("queued_tasks", team="research") == 1 and c.get("queued_tasks", team=gauges.NO_QUOTA) == 1
