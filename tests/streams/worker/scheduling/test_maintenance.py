"""Cordon, drain and uncordon, and a node that reports leaving, on three 8-card nodes worked out by
hand: a cordoned node takes nothing new and keeps its work; a draining node's work moves at its next
checkpoint (trigger drain), by the deadline at the latest, and is stopped and re-queued when nothing
can take it; leaving is a drain, not a failure."""

from schemas.operations import NodeCommand
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def cluster(n=3):
    s = make_scheduler([gpu_node(f"n{i}", NOW) for i in range(n)], {})
    s.node_timeout_s = float("inf")
    s.maintenance.drain_deadline_s = 600.0
    return s


def cmd(node, action, at=NOW, **kw):
    return NodeCommand(node=node, action=action, at=at, **kw)


def task(tid, cards=8, **kw):
    return Task(id=tid, type="training-data-parallel", resources={"cards": cards}, submitted_at=NOW, **kw)


def test_a_cordoned_node_takes_nothing_new_keeps_its_work_and_takes_work_again_once_uncordoned():
    s = cluster(2)
    assert s.decide(task("a"), NOW).nodes == ["n0"]
    s.start("a", ["n0"])
    s.maintenance.apply(cmd("n1", "cordon", by="ops"))
    d = s.decide(task("b"), NOW + 1)
    assert d.status == "unschedulable" and d.rejected == {"n0": "insufficient_cards", "n1": "node_cordoned"}
    s.maintenance.apply(cmd("n0", "cordon"))
    assert s.reschedule(NOW + 2) == [] and s.recover(NOW + 2) == [] and s.running["a"].nodes == ["n0"]
    assert [state for state, _ in s.node_states(s.nodes(NOW + 2), NOW + 2)] == ["cordoned", "cordoned"]
    # the reason, as sinfo -R says it: the action, who, when (UTC) (NOW is 1970-01-12 13:46:40Z)
    assert s.node_states(s.nodes(NOW + 2), NOW + 2)[1][1] == "cordon by ops at 1970-01-12 13:46Z"
    s.maintenance.apply(cmd("n1", "uncordon"))
    assert [d.task_id for d in s.retry_pending(NOW + 3)] == ["b"] and s.running["b"].nodes == ["n1"]


def test_a_draining_nodes_work_moves_at_its_next_checkpoint():
    s = cluster()
    home = s.decide(task("a", checkpoint_gb=1), NOW).nodes[0]
    s.start("a", [home])
    s.checkpoint("a", NOW + 5)  # before the drain: does not count
    s.maintenance.apply(cmd(home, "drain", at=NOW + 10))
    assert s.reschedule(NOW + 20) == []  # waits for a checkpoint
    assert s.node_states(s.nodes(NOW + 20), NOW + 20)[s.nodes(NOW).index[home]] == (
        "draining", "drain by api at 1970-01-12 13:46Z")  # no deadline given: the configured one applies
    version = s.version
    s.checkpoint("a", NOW + 30)
    # the worker rescores only when the state's version moved: a checkpoint must move it, or a quiet
    # cluster (no new window, no new report) never lets the drained task go (a live test caught it)
    assert s.version > version
    (ev,) = s.reschedule(NOW + 31)
    assert ev.trigger == "drain" and ev.from_nodes == [home] and ev.to_nodes != [home]
    assert set(s.ledger.nodes_of("a")) == {home, ev.to_nodes[0]}  # the source held until it starts there
    s.start("a", ev.to_nodes)
    assert s.ledger.nodes_of("a") == ev.to_nodes


def test_a_drain_moves_work_at_its_deadline_without_a_checkpoint_and_a_task_not_started_at_once():
    s = cluster(4)  # two drain; b and then a move to the other two
    home = s.decide(task("a"), NOW).nodes[0]
    s.start("a", [home])
    other = s.decide(task("b"), NOW).nodes[0]  # placed, never started
    s.maintenance.apply(cmd(home, "drain", at=NOW + 10, deadline_s=100))
    s.maintenance.apply(cmd(other, "drain", at=NOW + 10))
    (ev,) = s.reschedule(NOW + 11)  # b has not started: it moves at once
    assert (ev.task_id, ev.trigger) == ("b", "drain")
    assert s.reschedule(NOW + 109) == []
    (ev,) = s.reschedule(NOW + 110)  # the deadline: a moves without a checkpoint
    assert (ev.task_id, ev.trigger) == ("a", "drain")


def test_past_the_deadline_with_nowhere_to_go_the_work_is_stopped_and_requeued_from_its_checkpoint():
    s = cluster(1)
    s.decide(task("a"), NOW)
    s.start("a", ["n0"])
    s.checkpoint("a", NOW + 5)
    s.maintenance.apply(cmd("n0", "drain", at=NOW + 10, deadline_s=60))
    assert s.reschedule(NOW + 20) == [] and s.recover(NOW + 20) == [] and "a" in s.running
    assert s.reschedule(NOW + 71) == [] and s.recover(NOW + 71) == []
    (p,) = s.preemptions
    assert (p.task_id, p.by, p.reason, p.nodes) == ("a", "drain", "drain", ["n0"])
    assert "a" in s.pending and s.pending["a"].resume_from == NOW + 5 and s.ledger.nodes_of("a") == []
    assert s.retry_pending(NOW + 72) == []  # n0 still drains: it waits
    s.maintenance.apply(cmd("n0", "uncordon", at=NOW + 80))
    assert [d.nodes for d in s.retry_pending(NOW + 81)] == [["n0"]]


def test_a_node_reporting_leaving_drains_it_is_not_a_failure():
    s = cluster()
    home = s.decide(task("a", checkpoint_gb=1), NOW).nodes[0]
    s.start("a", [home])
    s.inv.put(home.encode(), gpu_node(home, NOW + 10, status="leaving"))
    assert s.watch(NOW + 10) == []  # no incident
    assert s.reschedule(NOW + 11) == [] and s.recover(NOW + 11) == []  # not moved as node_failed at once
    assert s.decide(task("b", cards=1), NOW + 12).nodes != [home]
    s.checkpoint("a", NOW + 20)
    (ev,) = s.reschedule(NOW + 21)
    assert ev.trigger == "drain"


def test_a_drains_reason_names_who_when_its_deadline_and_why():
    from streams.worker.scheduling.control import maintenance_reason

    c = cmd("n1", "drain", by="alice", deadline_s=3600, reason="bad fan")  # NOW: 1970-01-12 13:46:40Z
    assert maintenance_reason(c) == "drain by alice at 1970-01-12 13:46Z, deadline 1970-01-12 14:46Z: bad fan"
