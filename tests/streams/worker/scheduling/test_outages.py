"""Whole sites and single paths as incidents (issue 55), with a node's life cycle: open at detection,
located, mitigated once their tasks are elsewhere, recovered when the site or the path is back."""

import time

import pytest

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

SITES = {"a1": "A", "a2": "A", "b1": "B", "b2": "B"}


def sites_world(now):
    paths = {(a, b): {"rtt_ms": win(now, 0.5)} for a in SITES for b in SITES if a != b}
    return make_scheduler([gpu_node(n, now, zone=z) for n, z in SITES.items()], paths)


def test_a_site_whose_every_node_is_down_is_one_incident_over_its_nodes():
    now = time.time()
    s = sites_world(now)
    d = s.decide(Task(id="t", type="fine-tune", resources={"cards": 8}, checkpoint_gb=5), now)
    s.start("t", d.nodes)
    site = SITES[d.nodes[0]]
    later = now + 120  # the task's site stops reporting; the other reports on; every path carries probes
    for n, z in SITES.items():
        if z != site:
            s.inv.put(n.encode(), gpu_node(n, later, zone=z))
    got = s.watch(later)
    down = sorted(n for n, z in SITES.items() if z == site)
    assert sorted(i.node for i in got if i.scope == "node") == down
    (whole,) = [i for i in got if i.scope == "site"]
    assert (whole.node, whole.status, whole.cause, whole.nodes, whole.tasks) == (f"site/{site}", "open", "compute",
                                                                                down, ["t"])
    assert whole.detected_at == whole.located_at == later and whole.work_lost_s == 120.0
    assert s.incidents.count("site") == 1 and s.incidents.unmitigated()
    (ev,) = s.reschedule(later)
    assert SITES[ev.to_nodes[0]] != site
    mitigated = {i.node: i for i in s.watch(later + 1)}
    assert mitigated[f"site/{site}"].status == "mitigated" and mitigated[f"site/{site}"].mitigated_at == later + 1
    assert mitigated[f"site/{site}"].outcomes == {"t": f"moved to {ev.to_nodes[0]}"}
    assert s.watch(later + 2) == []
    # one node of the site is back: the site is no longer dark (its other node's incident stays open)
    s.inv.put(down[0].encode(), gpu_node(down[0], later + 3, zone=site))
    back = {(i.node, i.status, i.resolution) for i in s.watch(later + 3)}
    assert back == {(down[0], "recovered", "node back"), (f"site/{site}", "recovered", "site back")}
    assert list(s.incidents.open) == [down[1]] and s.incidents.count("site") == 0


def test_one_node_down_is_no_site_incident():
    now = time.time()
    s = sites_world(now)
    s.inv.put(b"a1", gpu_node("a1", now, zone="A", status="down"))
    assert [(i.node, i.scope) for i in s.watch(now)] == [("a1", "node")]


def _windows(s, t, dark: tuple[str, str] | None) -> None:
    """A window ending at ``t`` on every path (100 probes each): every one lost between ``dark``'s ends."""
    for key in list(s.net.table):
        rec = s.net.get_key(key)
        lost = 100 if dark is not None and {rec["src"], rec["dst"]} == set(dark) else 0
        s.net.put(key, {**rec, "metrics": {"rtt_ms": {**win(t, 0.5, lost=lost), "count": 100}}})
    s.touch()


@pytest.mark.parametrize("rule", ["seconds", "points"])
def test_a_path_that_goes_dark_between_a_gangs_nodes_is_an_incident_and_the_gang_moves(rule):
    now = time.time()
    nodes = ("n0", "n1", "n2", "n3")
    paths = {(a, b): {"rtt_ms": win(now, 0.5)} for a in nodes for b in nodes if a != b}
    s = make_scheduler([gpu_node(n, now) for n in nodes], paths)
    s.placement_rule = rule  # both the seconds rule's moves and the points rule's (moves.py, migration.py)
    d = s.decide(Task(id="g", type="training-data-parallel", peers=2, resources={"cards": 8}, checkpoint_gb=5,
                    expected_duration_s=3600.0, submitted_at=now), now)
    assert d.status == "placed" and len(d.nodes) == 2
    s.start("g", d.nodes)
    t = now + 45  # past the failure rule's 30 s grace: the paths are evidence
    for n in nodes:
        s.inv.put(n.encode(), gpu_node(n, t))
    _windows(s, t, tuple(d.nodes))
    got = s.watch(t)
    a, b = sorted(d.nodes)
    (inc,) = got  # no node failed: each end still reaches the others
    assert (inc.node, inc.scope, inc.status, inc.cause, inc.nodes, inc.tasks) == (
        f"path/{a}<->{b}", "path", "open", "network", [a, b], ["g"])
    assert inc.detected_at == inc.located_at == t and s.incidents.unmitigated()
    (ev,) = s.reschedule(t)
    assert set(ev.to_nodes) != {a, b} and ev.trigger == "path_failed"
    (mit,) = s.watch(t + 1)
    assert (mit.status, mit.mitigated_at, mit.outcomes) == ("mitigated", t + 1, {"g": f"moved to {','.join(ev.to_nodes)}"})
    _windows(s, t + 10, None)  # the path carries probes again
    for n in nodes:
        s.inv.put(n.encode(), gpu_node(n, t + 10))
    (rec,) = s.watch(t + 10)
    assert (rec.node, rec.status, rec.resolution) == (f"path/{a}<->{b}", "recovered", "path back")
    assert s.incidents.count("path") == 0
