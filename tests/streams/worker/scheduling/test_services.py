"""Elastic services in the scheduler (scheduling.services): replicas as tasks of their own, scaled from
load reports, warm standby promoted, surplus stopped after the scale-down delay, lost replicas
replaced, the image pull counted in where a replica goes."""

import time

from schemas.sched import Task, TaskEvent
from streams.worker.scheduling.services import Service, end_service, evaluate, scaled_decision
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NODES = ("n0", "n1", "n2", "n3")


def world(now):
    paths = {(n, "hub"): {"rtt_ms": win(now, 1.0)} for n in NODES}
    return make_scheduler([gpu_node(n, now) for n in NODES], paths)


def service(**scaling):
    return Task(id="chat", type="inference", resources={"cards": 4},
                scaling={"min_replicas": 2, "max_replicas": 6, "standby": 1, "prescale_lead_s": 0,
                         "scale_down_delay_s": 300, **scaling})


def load(at, utilisation, rate=100.0):
    return TaskEvent(task_id="chat", event="load", at=at, utilisation=utilisation, request_rate=rate)


def test_created_with_its_minimum_and_a_warm_standby():
    now = time.time()
    s = world(now)
    svc = Service(service())
    out = evaluate(s, svc, now, reason="created")
    assert [d.task_id for d in out.decisions] == ["chat.r0", "chat.r1", "chat.r2"]
    assert all(d.status == "placed" for d in out.decisions)
    c = out.change
    assert (c.from_replicas, c.to_replicas, c.reason) == (0, 2, "created")
    assert c.replicas == ["chat.r0", "chat.r1"] and c.standby == ["chat.r2"] and c.added == ["chat.r0", "chat.r1", "chat.r2"]
    # replicas are placed one by one (4 cards each on 8-card nodes) and are plain tasks
    assert s.running["chat.r0"].task.scaling is None and s.running["chat.r0"].task.type == "inference"
    d = scaled_decision(s, svc, c, now)
    assert d.status == "scaled" and len(d.nodes) == 2 and d.scaling.to_replicas == 2


def test_load_promotes_the_standby_and_a_second_look_does_not_scale_again():
    now = time.time()
    s = world(now)
    svc = Service(service())
    evaluate(s, svc, now, reason="created")
    # 2 serving at 90 %: ceil(2 x 0.9 / 0.6) = 3; the standby r2 serves at once, r3 is the new standby
    svc.remember(load(now + 10, 0.9), len(svc.replicas))
    out = evaluate(s, svc, now + 10)
    c = out.change
    assert (c.from_replicas, c.to_replicas, c.reason) == (2, 3, "utilisation")
    assert c.promoted == ["chat.r2"] and c.added == ["chat.r3"] and c.standby == ["chat.r3"]
    assert c.utilisation == 0.9 and c.request_rate == 100.0
    # the same report with 3 serving: 1.8 replicas' work at 60 % each is 3: no change
    assert evaluate(s, svc, now + 11).change is None


def test_scale_down_waits_for_the_delay_and_stops_the_newest():
    now = time.time()
    s = world(now)
    svc = Service(service())
    evaluate(s, svc, now, reason="created")
    svc.remember(load(now + 10, 0.9), 2)
    evaluate(s, svc, now + 10)  # 3 serving: r0, r1, r2
    svc.remember(load(now + 20, 0.1), 3)  # 0.3 replicas' work: 1 wanted, bounded to 2
    assert evaluate(s, svc, now + 20).change is None  # 3 were wanted 10 s ago
    assert evaluate(s, svc, now + 200).change is None
    out = evaluate(s, svc, now + 320)  # the recommendation of 3 (at +10) is older than 300 s
    c = out.change
    assert (c.to_replicas, c.reason, c.removed) == (2, "idle", ["chat.r2"])
    assert "chat.r2" not in s.running and s.ledger.nodes_of("chat.r2") == []


def test_a_lost_replica_is_replaced_and_an_ended_service_stops_them_all():
    now = time.time()
    s = world(now)
    svc = Service(service(standby=0))
    evaluate(s, svc, now, reason="created")
    s.end("chat.r0")  # failed for good
    out = evaluate(s, svc, now + 5)
    assert (out.change.from_replicas, out.change.to_replicas, out.change.reason) == (2, 2, "replaced")
    assert out.change.added == ["chat.r2"] and svc.replicas == ["chat.r1", "chat.r2"]
    assert sorted(end_service(s, svc)) == ["chat.r1", "chat.r2"] and not s.running


def test_replicas_beyond_the_cluster_wait_in_the_queue():
    now = time.time()
    s = world(now)  # 4 nodes x 8 cards: 8 replicas of 4 cards fit
    svc = Service(service(min_replicas=10, max_replicas=10, standby=0))
    out = evaluate(s, svc, now, reason="created")
    assert sum(d.status == "placed" for d in out.decisions) == 8
    assert len(s.pending) == 2 and out.change.to_replicas == 10


def test_the_image_pull_counts_in_where_a_replica_goes():
    now = time.time()
    # the same compute and latency to the registry; n1's NIC is 99.5 % used: 30 GB take minutes there
    busy = dict(win(now, 1.0), mean=0.995)
    paths = {("n0", "registry"): {"rtt_ms": win(now, 0.5)}, ("n1", "registry"): {"rtt_ms": win(now, 0.5)},
             ("n1", ""): {"bw_util": busy}}
    s = make_scheduler([gpu_node("n0", now), gpu_node("n1", now)], paths)
    with_image = Task(id="a", type="inference", resources={"cards": 1}, image={"node": "registry", "size_gb": 30})
    d = s.decide(with_image, now)
    assert d.nodes == ["n0"]
    near, far = d.candidates
    assert near.load_score == 100.0 and far.load_score < 60.0 and near.composite > far.composite
    # without the image both load nothing and score alike
    plain = s.decide(Task(id="b", type="inference", resources={"cards": 1}), now)
    assert plain.candidates[0].load_score is None


def test_a_restarted_scheduler_reads_the_stored_load_for_its_forecast(tmp_path):
    import asyncio

    from sinks.duckdb_store import DuckStore
    from streams.config import Settings
    from streams.worker.scheduling.history import seed_services

    now = 1_800_000_000.0
    with DuckStore(tmp_path / "h.duckdb") as store:  # a day and an hour of reports, one a minute, 100 req/s
        store.write_task_events([load(now - k * 60.0, 0.5, 100.0 + (k % 2)).model_dump()
                                 for k in range(1, 25 * 60)] + [load(now - 3 * 86400, 0.5, 5.0).model_dump()])
    s = world(now)
    svc = Service(service(prescale_lead_s=600))
    svc.load.append((now - 30.0, 120.0))  # one report since the restart
    s.services["chat"] = svc
    settings = Settings(duckdb_path=tmp_path / "h.duckdb")
    # within a day, two leads (10 min each) and a level (15 min): the reports of the last 1,475 minutes
    assert asyncio.run(seed_services(s, settings, now)) == 24 * 60 + 35
    assert svc.seeded and list(svc.load)[-1] == (now - 30.0, 120.0) and len(svc.load) == 24 * 60 + 35 + 1
    assert all(a[0] < b[0] for a, b in zip(svc.load, list(svc.load)[1:], strict=False))
    assert asyncio.run(seed_services(s, settings, now)) == 0  # once
    # with a day of history the forecast is yesterday's rate at the lead, scaled: about 100 (not NaN)
    assert 90.0 < svc.forecast(now) < 130.0


def test_a_latency_target_scales_too_and_once_per_report():
    now = time.time()
    s = world(now)
    svc = Service(service(standby=0, target_latency_ms=100))
    evaluate(s, svc, now, reason="created")  # 2 replicas
    # 2 at 30 % (reactive: ceil(2 x 0.3 / 0.6) = 1) but p95 latency 250 ms against 100: ceil(2 x 2.5) = 5
    ev = TaskEvent(task_id="chat", event="load", at=now + 5, utilisation=0.3, request_rate=50.0, latency_ms=250.0)
    svc.remember(ev, len(svc.replicas))
    out = evaluate(s, svc, now + 5)
    assert (out.change.from_replicas, out.change.to_replicas, out.change.reason) == (2, 5, "latency")
    # the same report seen with 5: 250 x 2 / 5 = 100 ms, on target: no change
    assert evaluate(s, svc, now + 6).change is None
    restored = Service.restored(svc.task, svc.state())
    assert restored.slow == svc.slow == 500.0 and restored.busy == svc.busy == 0.6


def test_a_sized_standby_follows_the_rises_the_reports_show_and_shrinks_after_the_delay():
    now = time.time()
    s = world(now)
    svc = Service(service(standby=0, standby_cover=0.75, cold_start_s=60, replica_rate=50))
    evaluate(s, svc, now, reason="created")
    assert svc.standby == []  # no history: the floor (0)
    for k, rate in enumerate((100.0, 200.0, 100.0, 200.0, 100.0)):
        svc.remember(load(now + 10 + 60 * k, 0.5, rate), 2)
    # rises within 60 s: 100, 0, 100, 0 (the last report's minute not yet seen); the 0.75-quantile is
    # the 3rd of [0, 0, 100, 100]: 100 req/s. At 100 req/s, 50 a replica, 2 serving:
    # ceil((100 + 100) / 50 - 2) = 2 warm replicas; the serving count is unchanged (2 at 50 %)
    out = evaluate(s, svc, now + 250)
    c = out.change
    assert (c.from_replicas, c.to_replicas, c.reason) == (2, 2, "standby")
    assert c.standby == ["chat.r2", "chat.r3"] and c.added == ["chat.r2", "chat.r3"] and c.removed == []
    # calm: four reports at 10 req/s; the rises now 100, 0, 100, 0, 0, 0, 0, 0: the 0.75-quantile is 0
    # and 10 req/s needs no standby — but 2 were wanted 240 s ago, within the 300 s delay
    for k in range(4):
        svc.remember(load(now + 310 + 60 * k, 0.1, 10.0), 2)
    assert evaluate(s, svc, now + 490).change is None and svc.standby == ["chat.r2", "chat.r3"]
    out = evaluate(s, svc, now + 560)
    c = out.change
    assert (c.to_replicas, c.reason, sorted(c.removed), c.standby) == (2, "standby", ["chat.r2", "chat.r3"], [])
    assert "chat.r2" not in s.running and "chat.r3" not in s.running
