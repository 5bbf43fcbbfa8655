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
