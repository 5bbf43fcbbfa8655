"""Routing weights for an elastic service (streams/worker/scheduling/routing.py, issue 54): each origin's
requests go to the replicas that answer them soonest — the measured RTT from the origin's probe
endpoint, the replicas' load, warm or cold — numbers by hand."""

import math

import pytest

from core.routing import split
from schemas.sched import Task, TaskEvent
from streams.worker.scheduling.routing import changed, routes_for
from streams.worker.scheduling.services import Service, evaluate
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0


def world(eu_to_n1: float = 40.0):
    """Two nodes: n0 beside the eu users (2 ms), n1 40 ms away; the us users the other way round."""
    nodes = [gpu_node("n0", NOW, rack="r0", address="10.0.0.10"), gpu_node("n1", NOW, rack="r1")]
    paths = {("users.eu", "n0"): {"rtt_ms": win(NOW, 2.0)}, ("users.eu", "n1"): {"rtt_ms": win(NOW, eu_to_n1)},
             ("users.us", "n0"): {"rtt_ms": win(NOW, 40.0)}, ("users.us", "n1"): {"rtt_ms": win(NOW, 2.0)}}
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = math.inf, None
    return s


def service(**scaling) -> Service:
    return Service(Task(id="chat", type="inference", resources={"cards": 8}, submitted_at=NOW,
                        scaling={"min_replicas": 2, "max_replicas": 2, "prescale_lead_s": 0, "spread": True,
                                 "replica_rate": 10.0, "port": 8000,
                                 "origins": [{"name": "eu", "endpoint": "users.eu", "share": 0.75},
                                             {"name": "us", "endpoint": "users.us", "share": 0.25}], **scaling}))


def placed(s, svc, rate=8.0):
    evaluate(s, svc, NOW, reason="created")
    for r in svc.replicas:
        s.start(r, s.running[r].nodes, None)  # the runner says it started: its model is loaded (warm)
    svc.remember(TaskEvent(task_id="chat", event="load", at=NOW, utilisation=rate / 20.0, request_rate=rate), 2)
    return {s.running[r].nodes[0]: r for r in svc.replicas}


def test_each_origin_goes_mostly_to_its_near_replica_as_the_kernel_splits_it():
    s, svc = world(), service()
    at = placed(s, svc)
    r = routes_for(s, svc, NOW, "load")
    assert r.request_rate == 8.0 and r.capacity_per_replica == 10.0 and r.rate_known and not r.overloaded
    eu, us = r.origins
    assert (eu.origin, eu.endpoint, eu.request_rate, us.request_rate) == ("eu", "users.eu", 6.0, 2.0)
    by = {x.node: x for x in eu.replicas}
    # the measured p95s, and the split core.routing makes of them: eu 6/s, us 2/s over two replicas of 10/s
    assert by["n0"].rtt_ms == 2.0 and by["n1"].rtt_ms == 40.0
    ref = split([[0.002, 0.040], [0.040, 0.002]], [6.0, 2.0], [10.0, 10.0], [True, True])
    assert by["n0"].share == pytest.approx(ref.x[0, 0] / 6.0, abs=1e-6)
    assert by["n0"].weight == round(256 * ref.x[0, 0] / 6.0) and by["n0"].weight > by["n1"].weight
    assert {x.node: x.weight for x in us.replicas}["n1"] > {x.node: x.weight for x in us.replicas}["n0"]
    # where each serves: the node's reported address (n0) or its id, and the service's port
    assert by["n0"].address == "10.0.0.10:8000" and by["n1"].address == "n1:8000"
    assert by["n0"].replica == at["n0"] and all(x.warm for x in eu.replicas)
    assert eu.expected_response_ms == pytest.approx(ref.response_s[0] * 1e3, rel=1e-3)


def test_a_degraded_path_loses_its_share_and_a_cold_replica_gets_nothing():
    s, svc = world(), service()
    placed(s, svc)
    before = {x.node: x.share for x in routes_for(s, svc, NOW, "load").origins[1].replicas}
    # the us users' path to n1 degrades from 2 to 500 ms: n0 (40 ms, though busy with eu's requests)
    # answers some of them sooner now
    s2 = world()
    s2.net.put(b"users.us|n1", {"src": "users.us", "dst": "n1", "metrics": {"rtt_ms": win(NOW, 500.0)}})
    svc2 = service()
    placed(s2, svc2)
    after = {x.node: x.share for x in routes_for(s2, svc2, NOW, "window").origins[1].replicas}
    assert before == {"n0": 0.0, "n1": 1.0} and after["n1"] < 1.0 and after["n0"] > 0.0
    # a replica whose model is not loaded yet gets nothing from anyone
    s3, svc3 = world(), service()
    evaluate(s3, svc3, NOW, reason="created")
    s3.start(svc3.replicas[0], s3.running[svc3.replicas[0]].nodes, None)
    r = routes_for(s3, svc3, NOW, "window")
    for o in r.origins:
        cold = [x for x in o.replicas if not x.warm]
        assert len(cold) == 1 and cold[0].weight == 0 and cold[0].share == 0.0
    assert not r.rate_known  # no load reported yet: half the warm replica's capacity is assumed
    assert r.request_rate == pytest.approx(0.5 * 1 * 10.0)


def test_an_unmeasured_origin_gets_nothing_and_only_changes_are_news():
    s, svc = world(), service(origins=[{"name": "eu", "endpoint": "users.eu", "share": 0.5},
                                       {"name": "apac", "endpoint": "users.apac", "share": 0.5}])
    placed(s, svc)
    r = routes_for(s, svc, NOW, "load")
    apac = r.origins[1]
    assert all(x.weight == 0 and x.rtt_ms is None for x in apac.replicas) and apac.expected_response_ms is None
    # eu's 4 requests/s are routed as if apac's were not there: as the kernel splits them alone
    ref = split([[0.002, 0.040]], [4.0], [10.0, 10.0], [True, True])
    assert not r.overloaded and [x.node for x in r.origins[0].replicas] == ["n0", "n1"]
    assert [x.share for x in r.origins[0].replicas] == pytest.approx((ref.x[0] / 4.0).tolist(), abs=1e-6)
    assert not changed(r, routes_for(s, svc, NOW + 1, "window"))  # the same weights: nothing to publish
    assert changed(None, r)
    # no origins: one origin, every replica as near — split by load alone, an equal share here
    plain = service(origins=[])
    s4 = world()
    placed(s4, plain)
    (only,) = routes_for(s4, plain, NOW, "load").origins
    assert only.origin == "any" and [x.weight for x in only.replicas] == [128, 128]


def test_a_replica_that_reports_itself_slow_loses_its_share():
    s, svc = world(), service(replica_rate=None, origins=[])
    at = placed(s, svc)  # the service's report: 8/s at 40 % of two replicas -> 10/s each at full load
    even = {x.node: x.share for x in routes_for(s, svc, NOW, "load").origins[0].replicas}
    assert even == {"n0": 0.5, "n1": 0.5}
    # n1's replica says it is 90 % busy with 2.25 requests/s: it serves 2.5/s at full load, not 10
    assert svc.remember_replica(TaskEvent(task_id=at["n1"], event="load", at=NOW + 1, utilisation=0.9,
                                          request_rate=2.25))
    assert svc.capacity == {at["n1"]: pytest.approx(2.5)}
    ref = split([[0.0, 0.0]], [8.0], [10.0, 2.5], [True, True])
    after = {x.node: x.share for x in routes_for(s, svc, NOW + 1, "load").origins[0].replicas}
    assert after["n1"] == pytest.approx(ref.x[0, 1] / 8.0, abs=1e-6) and after["n1"] < 0.2
    # a report without a rate or a utilisation says nothing of its capacity
    assert not svc.remember_replica(TaskEvent(task_id=at["n0"], event="load", at=NOW + 2, utilisation=0.0,
                                              request_rate=1.0))


def test_replicas_are_placed_near_the_users_they_serve_by_share():
    # four like nodes: n0, n1 beside eu's users (2 ms), n2, n3 beside us's (2 ms), 40 ms across
    nodes = [gpu_node(n, NOW, rack=f"r{n}") for n in ("n0", "n1", "n2", "n3")]
    paths = {(f"users.{o}", n): {"rtt_ms": win(NOW, 2.0 if (o == "eu") == (n in ("n0", "n1")) else 40.0)}
             for o in ("eu", "us") for n in ("n0", "n1", "n2", "n3")}
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = math.inf, None
    svc = Service(Task(id="chat", type="inference", resources={"cards": 8}, submitted_at=NOW, scaling={
        "min_replicas": 3, "max_replicas": 3, "standby": 1, "prescale_lead_s": 0,
        "origins": [{"name": "eu", "endpoint": "users.eu", "share": 0.55},
                    {"name": "us", "endpoint": "users.us", "share": 0.45}]}))
    evaluate(s, svc, NOW, reason="created")
    users = {r: s.running[r].task.users.node for r in svc.replicas + svc.standby}
    where = {r: s.running[r].nodes[0] for r in svc.replicas + svc.standby}
    # D'Hondt by share: eu (0.55), us (0.45 > 0.55/2), eu (0.275 > 0.45/2), the standby us (0.225 > 0.55/3)
    assert [users[r] for r in svc.replicas + svc.standby] == ["users.eu", "users.us", "users.eu", "users.us"]
    # each on a node beside its users (spread over the four)
    assert {where[r] for r in svc.replicas + svc.standby if users[r] == "users.eu"} == {"n0", "n1"}
    assert {where[r] for r in svc.replicas + svc.standby if users[r] == "users.us"} == {"n2", "n3"}
    assert s.running[svc.replicas[0]].task.users.size_gb == 0.0  # nothing loaded from the users


def test_a_service_whose_users_no_probe_measures_is_turned_away_naming_the_origin():
    s = world()
    ok = service().task
    assert s.impossible(ok, NOW) is None
    bad = ok.model_copy(update={"scaling": ok.scaling.model_copy(update={"origins": [
        ok.scaling.origins[0], ok.scaling.origins[1].model_copy(update={"endpoint": "users.apac"})]})})
    field, why = s.impossible(bad, NOW)
    assert field == "scaling.origins[1].endpoint" and "no probe measures a path from 'users.apac'" in why
