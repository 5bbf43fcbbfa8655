"""The API's read-only view of the scheduler: estimates of running, head-of-queue and queued tasks,
open incidents, and each team's quota use — worked out on three 8-card nodes."""

from schemas.quota import Quota, QuotaSet
from schemas.sched import Task
from streams.worker.scheduling.view import SchedulerView
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def test_estimates_and_quota_use_read_from_the_scheduler():
    s = make_scheduler([gpu_node(n, NOW) for n in ("n1", "n2", "n3")], {})
    s.node_timeout_s = float("inf")
    s.quotas.replace(QuotaSet(quotas=[Quota(team="research", guaranteed_cards=8, max_cards=16)]))
    view = SchedulerView(s)
    for k in range(3):
        t = Task(id=f"r{k}", type="training-data-parallel", team="research", resources={"cards": 8},
                 expected_duration_s=3600, submitted_at=NOW)
        s.decide(t, NOW)
    # r0 and r1 run (16 cards: the maximum); r2 waits
    assert view.estimate("r0", NOW + 600).end == NOW + 3600  # 3,600 s declared, placed at NOW
    assert view.estimate("r0", NOW + 5000).end == NOW + 5000  # overdue: now
    r2 = view.estimate("r2", NOW)  # 16 cards held of research's maximum of 16: the quota is what it waits for
    assert (r2.start, r2.reason, r2.position) == (None, "quota", 1) and "maximum" in r2.basis
    assert view.estimate("nobody", NOW) is None
    assert view.class_cards(NOW) == {"gpu": 24}
    use = {(u.accel_class, u.team): u for u in view.quota_usage(NOW)}
    row = use[("*", "research")]
    assert (row.guaranteed_cards, row.max_cards, row.used_cards, row.borrowed_cards, row.queued_tasks) == \
        (8.0, 16.0, 16.0, 8.0, 1)
    assert view.open_incidents() == []
    assert not any(hasattr(view, m) for m in ("decide", "end", "running", "pending", "ledger"))


def test_node_books_put_booked_beside_reported_and_the_gauges_follow_them():
    from streams.metrics import Counters
    from streams.worker.scheduling import gauges
    from tests.helpers.scheduling import win

    free = {"cards": 6, "mem_gb": 480, "host_mem_gb": 1024}  # two cards in use by work cnsched did not place
    s = make_scheduler([gpu_node("n0", NOW, free=free), gpu_node("n1", NOW), gpu_node("n2", NOW)],
                       {("n0", "n1"): {"rtt_ms": win(NOW, 2.0)}, ("n1", "n2"): {"rtt_ms": win(NOW, 80.0, lost=20)}})
    s.node_timeout_s = float("inf")
    s.decide(Task(id="a", type="inference", resources={"cards": 4}), NOW)
    view = SchedulerView(s)
    books = {b.node: b for b in view.node_books(NOW)}
    on = next(n for n, b in books.items() if b.tasks == ["a"])
    assert books[on].booked == 4 and books["n1" if on != "n1" else "n2"].booked == 0
    if on == "n0":  # books 8 - 4 = 4, report 6 - 0 booked since: 4
        assert (books["n0"].reported_free, books["n0"].free) == (6, 4)
    else:  # n0: books 8, its report 6: it offers 6
        assert (books["n0"].reported_free, books["n0"].free, books["n0"].booked) == (6, 6, 0)
    assert books["n1"].reported_free is None and {b.state for b in books.values()} == {"up"}
    paths, dropped = view.path_states(NOW, limit=1)
    assert dropped == 1 and len(paths) == 1
    # paths touching a busy node first, then the worst: n0 busy -> n0->n1; else n1->n2 (busy or worse)
    assert paths[0][:2] == (("n0", "n1") if on == "n0" else ("n1", "n2"))
    c = Counters()
    gauges.publish(c, view, NOW, nodes_max=2, paths_max=10)
    assert c.get("node_cards_booked", node=on) == 4 and c.get("node_cards_reported_free", node="n0") == 6
    assert c.get("metrics_series_dropped", kind="node") == 1 and c.get("metrics_series_dropped", kind="path") == 0
    text = c.exposition()
    assert 'cnsched_node_cards{node="n2"}' not in text  # the cap: two nodes shown
    assert 0 < c.get("path_quality", src="n1", dst="n2") < c.get("path_quality", src="n0", dst="n1")
    assert c.get("path_rtt_p95_ms", src="n1", dst="n2") == 80.0 and c.get("path_loss_ratio", src="n1", dst="n2") == 0.2
    gauges.publish(c, view, NOW, nodes_max=1, paths_max=0)  # series beyond the new caps are gone
    assert 'node="n1"' not in c.exposition() and "cnsched_path_quality{" not in c.exposition()
    gauges.clear(c)
    assert "cnsched_node_cards{" not in c.exposition() and "cnsched_node_up{" not in c.exposition()
