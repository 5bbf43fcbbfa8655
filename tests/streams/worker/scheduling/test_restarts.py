"""A failed task resumes from its last checkpoint (issue 12, finding 6): re-queued, placed again by the
next retry, the work since the checkpoint counted as lost; failed for good after max_restarts. Moves
and incidents count from the checkpoint too, and a move transfers the checkpoint's size."""

import math
import time

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def world(now):
    paths = {(n, "store"): {"rtt_ms": win(now, 0.5)} for n in ("n0", "n1")}
    return make_scheduler([gpu_node("n0", now), gpu_node("n1", now)], paths)


def beat(s, t):
    """Both nodes report at t (their heartbeat)."""
    for n in ("n0", "n1"):
        s.inv.put(n.encode(), gpu_node(n, t))


def job():
    return Task(id="j", type="fine-tune", resources={"cards": 4}, checkpoint_gb=10,
                data_source={"node": "store", "size_gb": 1})


def test_a_failed_task_resumes_from_its_checkpoint():
    now = time.time()
    s = world(now)
    first = s.decide(job(), now).nodes
    s.start("j", first)  # as its runner says
    s.checkpoint("j", now + 100, gb=25.0)
    assert s.running["j"].state_gb == 25.0 and s.running["j"].progress_since == now + 100
    # it fails 130 s in: 30 s of work since the checkpoint are lost; it is queued, its nodes free
    assert s.fail("j", now + 130, max_restarts=3) == 30.0
    assert "j" not in s.running and s.pending["j"].restarts == 1 and s.pending["j"].resume_from == now + 100
    assert s.ledger.nodes_of("j") == []
    beat(s, now + 131)
    (d,) = s.retry_pending(now + 131)
    assert d.status == "placed" and d.restarts == 1 and d.resume_from == now + 100 and d.nodes
    run = s.running["j"]
    assert run.restarts == 1 and run.checkpoint_at == now + 100 and s.ledger.nodes_of("j") == d.nodes
    assert first  # placed the first time too


def test_after_max_restarts_a_failure_is_final():
    now = time.time()
    s = world(now)
    s.decide(job(), now)
    for k in range(2):
        assert s.fail("j", now + 10 * (k + 1), max_restarts=2) is not None
        beat(s, now + 10 * (k + 1) + 1)
        assert [d.restarts for d in s.retry_pending(now + 10 * (k + 1) + 1)] == [k + 1]
    assert s.running["j"].restarts == 2
    assert s.fail("j", now + 50, max_restarts=2) is None
    assert "j" not in s.running and "j" not in s.pending and s.ledger.tasks() == []


def test_a_node_failure_counts_the_work_since_the_checkpoint():
    now = time.time()
    s = world(now)
    home = s.decide(job(), now).nodes[0]
    s.start("j", [home])  # as its runner says
    s.checkpoint("j", now + 50)
    s.checkpoint("j", now + 40)  # an older checkpoint reported late changes nothing
    assert s.running["j"].checkpoint_at == now + 50 and math.isnan(s.running["j"].checkpoint_gb)
    other = "n1" if home == "n0" else "n0"
    s.inv.put(other.encode(), gpu_node(other, now + 120))
    (opened,) = s.watch(now + 120)
    assert opened.node == home and opened.work_lost_s == 70.0
