"""An operator's commands and a waiting task's reason, on small clusters worked out by hand: cancel
(queued, and running: the cards stay booked until the runner confirms), hold and release, a new
priority, impossible tasks turned away, and the one thing a queued task waits for."""

from schemas.quota import Quota, QuotaSet
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def cluster(n=2, **node):
    s = make_scheduler([gpu_node(f"n{i}", NOW, **node) for i in range(n)], {})
    s.node_timeout_s = float("inf")
    return s


def task(tid, cards=8, expected_duration_s=3600, **kw):
    return Task(id=tid, type="training-data-parallel", resources={"cards": cards}, submitted_at=NOW,
                expected_duration_s=expected_duration_s, **kw)


def test_cancel_a_queued_task_and_a_running_one_whose_cards_wait_for_the_runner():
    s = cluster(1)
    assert s.decide(task("a"), NOW).nodes == ["n0"]
    assert s.decide(task("b"), NOW).status == "unschedulable"
    d = s.cancel("b", NOW + 1, by="ops")
    assert (d.status, d.nodes, d.fallbacks[0].reason) == ("cancelled", [], "cancelled by ops")
    assert "b" not in s.pending and s.task_of("b") is None
    d = s.cancel("a", NOW + 2)
    assert (d.status, d.nodes) == ("cancelled", ["n0"]) and "a" not in s.running
    # the node is still booked: the old work may run until its runner says it stopped
    assert s.decide(task("c"), NOW + 3).status == "unschedulable"
    assert s.stopped("a") and not s.stopped("a")
    assert s.retry_pending(NOW + 4)[0].nodes == ["n0"]
    assert s.cancel("nobody", NOW) is None


def test_a_stop_no_runner_confirms_frees_the_cards_after_the_timeout():
    s = cluster(1)
    s.decide(task("a"), NOW)
    s.cancel("a", NOW)
    assert s.expire_stops(NOW + 300, 300) == [] and s.expire_stops(NOW + 300, 0) == []  # 0: wait for ever
    assert s.expire_stops(NOW + 301, 300) == ["a"]
    assert s.decide(task("b"), NOW + 302).nodes == ["n0"]


def test_an_overdue_task_is_stopped_at_its_limit():
    # a (limit 90 s) and b (no limit) start at NOW; at 90 s a is at its limit, past it cancelled; b runs on
    s = cluster(2)
    assert s.decide(task("a", time_limit_s=90.0), NOW).nodes and s.decide(task("b"), NOW).nodes
    assert s.expire_limits(NOW + 95) == []  # not started: nothing runs to stop
    s.start("a", s.running["a"].nodes), s.start("b", s.running["b"].nodes)
    assert s.expire_limits(NOW + 90) == []
    ((t, d),) = s.expire_limits(NOW + 90.5)
    assert t.id == "a" and d.status == "cancelled" and d.fallbacks[0].reason == "cancelled by its time limit (90 s)"
    assert "a" not in s.running and "b" in s.running and s.expire_limits(NOW + 10_000) == []
    assert s.stopped("a")  # its cards were held until its runner stopped it


def test_a_held_task_is_not_placed_until_released_and_only_queued_tasks_are_held():
    s = cluster(1)
    s.decide(task("a"), NOW)
    s.decide(task("b"), NOW)
    assert s.hold("b") and not s.hold("a") and not s.release("a")
    assert s.waiting("b", NOW).reason == "held" and s.waiting("b", NOW).position is None
    s.end("a")
    assert s.retry_pending(NOW + 10) == [] and "b" in s.pending  # room, but held
    assert s.expire_queued(NOW + 10**6, 60) == []  # a held task does not expire either
    assert s.release("b") and not s.release("b")
    assert [d.task_id for d in s.retry_pending(NOW + 11)] == ["b"]


def test_a_new_priority_changes_the_queue_order():
    s = cluster(1)
    s.decide(task("a"), NOW)
    for t in ("x", "y"):
        s.decide(task(t, priority=50), NOW)
    assert [t.id for t in s.queue_order(NOW)] == ["x", "y"]  # equal priority: the earlier first
    assert s.reprioritise("y", 90).priority == 90
    assert [t.id for t in s.queue_order(NOW)] == ["y", "x"]
    assert s.waiting("y", NOW).position == 1 and s.waiting("x", NOW).position == 2
    assert s.reprioritise("nobody", 1) is None


def test_impossible_tasks_name_the_field_and_waiting_ones_are_not_impossible():
    s = cluster(2, region="eu")
    assert s.impossible(task("ok"), NOW) is None
    s.decide(task("a"), NOW)
    s.decide(task("b"), NOW)
    assert s.impossible(task("busy"), NOW) is None  # both nodes full: it waits, it is not impossible
    cases = {
        "resources.accel_classes": Task(id="c", type="inference", resources={"cards": 1, "accel_classes": ["tpu"]}),
        "resources.cards": task("d", cards=16),
        "resources": Task(id="e", type="inference", resources={"cards": 1, "host_mem_gb": 5000}),
        "constraints": task("f", constraints={"regions": ["us"]}),
        "peers": task("g", peers=3),
    }
    for field, t in cases.items():
        got = s.impossible(t, NOW)
        assert got is not None and got[0] == field, (field, got)
    assert "largest has 8" in s.impossible(task("d", cards=16), NOW)[1]
    assert "3" in s.impossible(task("g", peers=3), NOW)[1] and "2 could" in s.impossible(task("g", peers=3), NOW)[1]
    empty = make_scheduler([], {})
    assert empty.impossible(task("h", cards=16), NOW) is None  # no node reported yet: it waits
    s.quotas.replace(QuotaSet(quotas=[Quota(team="t", guaranteed_cards=8, max_cards=8)]))
    assert s.impossible(task("i", team="t", peers=2), NOW) == ("team", "it needs 16 cards; team t may hold at most 8")


def test_waiting_names_resources_reservation_and_retrying():
    s = cluster(3)
    s.decide(task("a"), NOW)
    s.decide(task("b"), NOW)
    gang = task("gang", peers=2, priority=90)
    s.decide(gang, NOW)  # one node free, two needed
    w = s.waiting("gang", NOW)
    assert (w.reason, w.position) == ("resources", 1)
    assert w.detail == "1/3 nodes can take a worker now (it needs 2): 2 fewer than 8 free cards (n0, n1)"
    s.retry_pending(NOW + 1)  # the gang is first in line: it holds a reservation (n2 and the first to free)
    assert s.reservation is not None and s.reservation.task_id == "gang"
    assert s.waiting("gang", NOW + 1).reason == "resources" and "reserved for it" in s.waiting("gang", NOW + 1).detail
    late = task("long", expected_duration_s=7200)  # would hold n2 past the reservation's start
    s.pending["long"] = type(s.pending["gang"])(late, NOW)
    w = s.waiting("long", NOW + 1)
    assert (w.reason, w.position) == ("reservation", 2) and "gang" in w.detail
    short = task("short", cards=1, expected_duration_s=60)  # ends before the reservation starts: backfill
    s.pending["short"] = type(s.pending["gang"])(short, NOW)
    assert s.waiting("short", NOW + 1).reason == "retrying"


def test_a_task_limited_to_a_class_waits_for_that_class_and_names_the_nodes_of_each_check():
    """Issue 51, finding 2: an 8-card h100 task with both h100 nodes booked and an a100 node empty
    waits for resources (it said "retrying: fits now" for minutes: the class was left out)."""
    s = make_scheduler([gpu_node("h1", NOW, accel_class="h100"), gpu_node("h2", NOW, accel_class="h100"),
                        gpu_node("a1", NOW, accel_class="a100")], {})
    s.node_timeout_s = float("inf")
    for tid in ("x", "y"):
        assert s.decide(Task(id=tid, type="training-data-parallel", submitted_at=NOW, expected_duration_s=3600,
                        resources={"cards": 8, "accel_classes": ["h100"]}), NOW).status == "placed"
    h = Task(id="h", type="training-data-parallel", submitted_at=NOW, expected_duration_s=3600,
             resources={"cards": 8, "accel_classes": ["h100"]})
    assert s.decide(h, NOW).status == "unschedulable"
    w = s.waiting("h", NOW)
    assert w.reason == "resources"
    assert w.detail == ("0/3 nodes can take a worker now: 1 not of accelerator class h100 (a1); "
                        "2 fewer than 8 free cards (h1, h2)")


def test_a_queued_task_that_can_never_run_on_the_cluster_as_it_is_says_so():
    """A 2-worker h100 gang on a cluster whose only h100 node left: waiting, but never (not resources)."""
    s = make_scheduler([gpu_node("h1", NOW, accel_class="h100"), gpu_node("a1", NOW, accel_class="a100")], {})
    s.node_timeout_s = float("inf")
    g = Task(id="g", type="training-data-parallel", submitted_at=NOW, resources={"cards": 8, "accel_classes": ["h100"]},
             peers=2)
    s.decide(g, NOW)
    w = s.waiting("g", NOW)
    assert w.reason == "never" and w.detail.startswith("cannot run on the cluster as it is: 1/2 nodes can take")
    assert "1 not of accelerator class h100 (a1)" in w.detail


def test_a_runners_report_about_nodes_the_task_no_longer_holds_is_stale():
    s = cluster(2)
    d = s.decide(task("a"), NOW)
    other = [n for n in ("n0", "n1") if n not in d.nodes]
    assert not s.stale("a", "failed", d.nodes) and not s.stale("a", "started", d.nodes)  # its placement now
    assert s.stale("a", "failed", other) and s.stale("a", "refused", other) and s.stale("a", "started", other)
    assert not s.stale("a", "failed", []) and not s.stale("a", "checkpoint", other)  # no nodes named; not judged
    s.fail("a", NOW + 5, max_restarts=3)
    assert "a" in s.pending and s.stale("a", "failed", d.nodes)  # re-queued: placed nowhere
