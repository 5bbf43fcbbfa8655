"""The replay turns decisions' audit trail off (Scheduler.audit): the same placements, queue and
reasons for waiting, without candidates, rejected nodes or the compute-only counterfactual."""

from streams.dev.bench.decide import _tasks, _world


def test_without_the_audit_trail_every_decision_places_the_same():
    full, now, _ = _world(16, 4)
    lean, _, _ = _world(16, 4, now)
    lean.audit = False
    tasks = _tasks(60, 4, "a")  # more than fit: some wait, some gangs
    a = full.decide_many(tasks, now)
    b = lean.decide_many(tasks, now)
    assert [(d.status, d.nodes, d.alpha) for d in a] == [(d.status, d.nodes, d.alpha) for d in b]
    assert {d.status for d in a} == {"placed", "unschedulable"}
    assert all(d.candidates for d in a if d.status == "placed") and not any(d.candidates for d in b)
    assert any(d.rejected_counts for d in a) and not any(d.rejected or d.rejected_counts for d in b)
    assert any(d.compute_only_nodes for d in a) and not any(d.compute_only_nodes for d in b)
    assert list(full.pending) == list(lean.pending) and list(full.running) == list(lean.running)
    # the queue retried as it stands: the same again
    more = _tasks(20, 5, "b")
    assert [(d.task_id, d.nodes) for d in full.decide_many(more, now + 1)] == \
        [(d.task_id, d.nodes) for d in lean.decide_many(more, now + 1)]
    assert [(d.task_id, d.nodes) for d in full.retry_pending(now + 2)] == \
        [(d.task_id, d.nodes) for d in lean.retry_pending(now + 2)]
