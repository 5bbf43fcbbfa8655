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


def place(s, now, start: bool = True):
    d = s.decide(Task(id="t", type="fine-tune", resources={"cards": 2}, checkpoint_gb=5,
                      data_source={"node": "store", "size_gb": 1}), now)
    if start:
        s.start("t", d.nodes)  # as its runner says
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
    # past the 30 s grace of a node's and a path's first window (core.failures.FailureRule), also when the
    # path table is aged to a time up to 12 s earlier (path_table.aged_to: steps of (300 - 60) / 20 s)
    t = now + 45
    for n in ("n0", "n1", "n2"):
        s.inv.put(n.encode(), gpu_node(n, t))  # every node reports, in time
    for key in list(s.net.table):  # a new window on every path: those touching home lost every probe
        rec = s.net.get_key(key)
        s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t, 0.5, lost=100 if home in (rec["src"], rec["dst"]) else 0)}})
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


def _lose(s, t, touching: str | None = None, src: str | None = None, count: int = 100) -> None:
    """A window ending at ``t`` on every path: every probe lost on those touching ``touching`` (or from
    ``src``), ``count`` probes each; none lost on the others."""
    for key in list(s.net.table):
        rec = s.net.get_key(key)
        if (touching is not None and touching in (rec["src"], rec["dst"])) or rec["src"] == src:
            s.net.put(key, {**rec, "metrics": {"rtt_ms": {**win(t, 0.5, lost=count), "count": count}}})
        else:
            s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t, 0.5)}})
    s.touch()


def _report_all(s, t) -> None:
    for n in ("n0", "n1", "n2"):
        s.inv.put(n.encode(), gpu_node(n, t))


def test_probes_coming_up_one_by_one_fail_nothing():
    """A probe agent starting on a node whose peers' agents are not up yet sees every probe lost (no
    peer has ever answered): that is no evidence, so no incident, no eviction."""
    now = time.time()
    s = make_scheduler([gpu_node(n, now) for n in ("n0", "n1", "n2")], {})
    home = place(s, now)
    for i, n in enumerate(("n0", "n1", "n2")):  # agents 12 s apart; the first windows of each all lost
        t = now + 40 + 12 * i
        _report_all(s, t)
        for peer in ("n0", "n1", "n2"):
            if peer != n:
                s.net.put(f"{n}|{peer}".encode(), {"src": n, "dst": peer, "metrics": {
                    "rtt_ms": {**win(t, 0.5, lost=10), "count": 10}}})
        s.touch()
        assert s.watch(t) == [] and s.reschedule(t) == []
    assert home in s.running["t"].nodes and s.incidents.open == {}


def test_one_observer_alone_or_a_single_probe_is_no_network_failure():
    now = time.time()
    s = world(now)
    home = place(s, now)
    t = now + 40
    _report_all(s, t)
    _lose(s, t, src=home)  # only home's own agent sees its paths lost; its peers' probes to it answer
    assert s.watch(t) == []
    _lose(s, t + 10, touching=home, count=1)  # every path lost, but one probe a window
    _report_all(s, t + 10)
    assert s.watch(t + 10) == [] and s.reschedule(t + 10) == []


def test_a_nic_gone_dark_is_still_a_network_failure_and_the_work_moves_within_a_minute():
    now = time.time()
    s = world(now)
    home = place(s, now)
    dark = now + 45  # established: past the grace, also aged to a step of 12 s (see above); its peers answered before
    _report_all(s, dark)
    _lose(s, dark, touching=home)
    (opened,) = s.watch(dark)
    assert (opened.node, opened.cause, opened.tasks, opened.detected_at) == (home, "network", ["t"], dark)
    (ev,) = s.reschedule(dark)
    assert ev.trigger == "node_failed" and home not in ev.to_nodes


def test_every_node_losing_its_paths_at_once_is_an_incident_on_the_observers_not_evictions():
    """Two of three nodes losing every path at once (beyond half of the nodes): the probes are suspect;
    each gets an incident of cause observers, nothing moves, and it recovers when the paths are back."""
    now = time.time()
    s = world(now)
    home = place(s, now)
    t = now + 45  # past the grace, also aged to a step of 12 s
    _report_all(s, t)
    for key in list(s.net.table):
        rec = s.net.get_key(key)
        s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t, 0.5, lost=100)}})
    s.touch()
    opened = s.watch(t)
    assert {(i.node, i.cause, i.status) for i in opened} == {(n, "observers", "open") for n in ("n0", "n1", "n2")}
    assert s.reschedule(t) == [] and s.running["t"].nodes == [home]
    assert not s.incidents.unmitigated()  # nothing waits to be moved
    for key in list(s.net.table):
        rec = s.net.get_key(key)
        s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t + 10, 0.5)}})
    s.touch()
    _report_all(s, t + 10)
    back = s.watch(t + 10)
    assert {(i.node, i.status, i.resolution) for i in back} == {(n, "recovered", "node back") for n in ("n0", "n1", "n2")}


def test_a_node_whose_own_probes_went_quiet_and_whose_peers_lose_it_is_a_network_failure():
    """A dark NIC as the scheduler sees it when the node's compute reports still come in (another
    network): its own probe agent's windows stop, and its peers' probes to it are all lost. Its silent
    paths' last windows (fine, from before) stop counting once a grace period (30 s) behind the others'."""
    now = time.time()
    s = world(now)
    home = place(s, now)
    dark = now + 40
    _lose(s, dark, touching="nobody")  # every path fine at dark: home's last windows
    for t in (dark + 10, dark + 20, dark + 30, dark + 40):
        _report_all(s, t)
        for key in list(s.net.table):
            rec = s.net.get_key(key)
            if rec["src"] != home:  # home's agent sends nothing any more; the others go on, losing home
                s.net.put(key, {**rec, "metrics": {"rtt_ms": win(t, 0.5, lost=100 if rec["dst"] == home else 0)}})
        s.touch()
        got = s.watch(t)
        if t <= dark + 30:  # home's own windows within the grace (30 s) of the newest: it reaches its peers
            assert got == []
    (opened,) = got  # more than 30 s behind at dark + 40: known no more; under the seed's minute
    assert (opened.node, opened.cause, opened.detected_at) == (home, "network", dark + 40)
    (ev,) = s.reschedule(dark + 40)
    assert ev.trigger == "node_failed" and home not in ev.to_nodes


def test_a_task_that_never_started_loses_no_work_when_its_node_fails():
    """Issue 51, finding 5: without a runner a placed task never starts; its node failing loses no
    work (it counted the time since placement)."""
    now = time.time()
    s = world(now)
    home = place(s, now, start=False)
    later = now + 120
    for n in ("n0", "n1", "n2"):
        if n != home:
            s.inv.put(n.encode(), gpu_node(n, later))
    (opened,) = s.watch(later)
    assert (opened.node, opened.tasks, opened.work_lost_s) == (home, ["t"], 0.0)
