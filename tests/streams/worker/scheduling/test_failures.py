"""Node failures seen by the scheduler: detected from reports and windows, located (compute or
network), the tasks moved off at once (the incident mitigated, still open), and recovered only when the
node is back or removed from the inventory."""

import time

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def world(now):
    paths = {(a, b): {"rtt_ms": win(now, 0.5)} for a in ("n0", "n1", "n2") for b in ("n0", "n1", "n2", "store")
             if a != b}
    return make_scheduler([gpu_node(n, now) for n in ("n0", "n1", "n2")], paths)


def place(s, now):
    d = s.decide(Task(id="t", type="fine-tune", resources={"cards": 2}, checkpoint_gb=5,
                      data_source={"node": "store", "size_gb": 1}), now)
    return d.nodes[0]


def test_a_silent_node_is_a_compute_failure_its_task_moves_and_the_incident_recovers():
    now = time.time()
    s = world(now)
    home = place(s, now)
    assert s.watch(now + 1) == []
    later = now + 120  # home stops reporting; the others go on; every path still carries probes
    for n in ("n0", "n1", "n2"):
        if n != home:
            s.inv.put(n.encode(), gpu_node(n, later))
    (opened,) = s.watch(later)
    assert (opened.node, opened.status, opened.cause, opened.tasks) == (home, "open", "compute", ["t"])
    assert opened.detected_at == opened.located_at == later and opened.work_lost_s == 120.0
    (ev,) = s.reschedule(later)
    assert ev.trigger == "node_failed" and ev.to_nodes != [home]
    (mit,) = s.watch(later + 1)
    assert (mit.node, mit.status, mit.mitigated_at, mit.recovered_at) == (home, "mitigated", later + 1, None)
    assert mit.outcomes == {"t": f"moved to {ev.to_nodes[0]}"}
    assert list(s.incidents.open) == [home] and not s.incidents.unmitigated()
    assert s.watch(later + 2) == []  # still silent: the same failure, no second incident, still open
    s.inv.put(home.encode(), gpu_node(home, later + 3))  # it reports again
    (rec,) = s.watch(later + 3)
    assert (rec.status, rec.recovered_at, rec.resolution, rec.mitigated_at) == ("recovered", later + 3, "node back",
                                                                                  later + 1)
    assert s.incidents.open == {}


def test_a_node_whose_paths_are_all_lost_is_a_network_failure():
    now = time.time()
    s = world(now)
    home = place(s, now)
    t = now + 10
    for key in list(s.net.table):
        rec = s.net.get_key(key)
        if home in (rec["src"], rec["dst"]):
            s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t, 0.5, lost=100)}})  # every probe lost
    s.touch()
    (opened,) = s.watch(t)
    assert (opened.node, opened.cause) == (home, "network")
    view = s.nodes(t)
    assert not view.available[view.index[home]]  # reports say up, but nothing reaches it
    (ev,) = s.reschedule(t)
    assert ev.trigger == "node_failed"
    assert [i.status for i in s.watch(t + 1)] == ["mitigated"]


def test_a_failed_node_without_tasks_stays_open_until_it_is_back():
    now = time.time()
    s = world(now)
    s.inv.put(b"n2", gpu_node("n2", now, status="down"))
    (opened,) = s.watch(now)
    assert (opened.node, opened.cause, opened.tasks) == ("n2", "compute", [])
    assert s.watch(now + 1) == []
    s.inv.put(b"n2", gpu_node("n2", now + 2))
    assert [(i.node, i.status, i.resolution) for i in s.watch(now + 2)] == [("n2", "recovered", "node back")]


def test_an_incident_of_a_node_removed_from_the_inventory_is_recovered_as_removed():
    now = time.time()
    s = world(now)
    s.inv.put(b"n2", gpu_node("n2", now, status="down"))
    (opened,) = s.watch(now)  # no tasks on it: nothing to move (mitigated at once), open while it is down
    assert (opened.status, opened.mitigated_at) == ("open", now) and list(s.incidents.open) == ["n2"]
    assert s.watch(now + 1) == []
    del s.inv.table[b"n2"]
    s.inv.invalidate()
    s.touch()
    assert [(i.node, i.status, i.resolution) for i in s.watch(now + 2)] == [("n2", "recovered", "node removed")]
