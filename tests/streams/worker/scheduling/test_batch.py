"""A burst decided in one batch (decide_many: one node view, one kernel call per profile) decides
exactly what deciding its tasks one call each decides: same nodes, same statuses, same books —
gangs, stores at rack level, and more tasks than the cluster holds included."""

import numpy as np
import pytest

from streams.dev.bench.decide import _tasks, _world


@pytest.mark.parametrize("nodes,tasks,seed", [(64, 40, 0), (64, 150, 1), (200, 120, 2)])
def test_batch_decides_what_one_call_each_decides(nodes, tasks, seed):
    one, now, _ = _world(nodes, seed)
    many, _, _ = _world(nodes, seed, now)
    burst = _tasks(tasks, seed, "t")
    a = [one.decide(t, now) for t in burst]
    b = many.decide_many(burst, now)
    assert [d.status for d in a] == [d.status for d in b]
    assert [d.nodes for d in a] == [d.nodes for d in b]
    assert [d.rejected_counts for d in a] == [d.rejected_counts for d in b]
    assert [[c.node for c in d.candidates] for d in a] == [[c.node for c in d.candidates] for d in b]
    if tasks * 3 > nodes * 2:  # the small cluster filled up: the rest wait
        assert any(d.status != "placed" for d in b)
    ids = one.nodes(now).index
    np.testing.assert_array_equal(one.ledger.allocated(ids, len(ids)), many.ledger.allocated(ids, len(ids)))
    assert sorted(one.pending) == sorted(many.pending)


def test_a_queue_retry_scored_in_chunks_decides_what_scoring_every_task_decides(monkeypatch):
    """A retry of a long queue scores its tasks as it reaches them (ChunkedScores: 8, 16, ... at a
    time); a task's row is the same in any chunk, so the decisions are those of one call over all."""
    import streams.worker.scheduling.batch as batch
    import streams.worker.scheduling.state as state

    scored = []
    real = batch.BatchScores.__init__

    def counting(self, sched, tasks, nodes, profile):
        scored.append(len(tasks))
        real(self, sched, tasks, nodes, profile)

    monkeypatch.setattr(batch.BatchScores, "__init__", counting)
    results = {}
    for chunk in (1, 10**6):
        monkeypatch.setattr(state, "QUEUE_CHUNK", chunk)
        sched, now, _ = _world(64, 5)
        first = sched.decide_many(_tasks(300, 5, "q"), now)  # more than the cluster holds: most wait
        placed = [d.task_id for d in first if d.status == "placed"]
        assert len(sched.pending) > 200
        for task_id in placed[:6]:  # a few finish: room for a few of the queue
            sched.end(task_id)
        scored.clear()
        got = sched.retry_pending(now + 60)
        results[chunk] = ([(d.task_id, d.nodes, [(c.node, c.composite, c.network_score, c.alpha) for c in d.candidates]) for d in got],
                          sorted(sched.pending), sum(scored))
    lazy, full = results[1], results[10**6]
    assert lazy[0] and lazy[0] == full[0]  # the same tasks placed, on the same nodes, with the same scores
    assert lazy[1] == full[1]
    assert lazy[2] < full[2] / 4  # and far fewer tasks scored to get there


def test_tasks_are_scored_by_their_profile_whether_kinds_are_given_or_read():
    """batch.by_profile: every task's scores are its profile's (profile_of), at its own row, the same
    when the kinds come from the pending book (a queue's retry) as when read from the tasks; one
    task given its own network profile is scored by that one, not its type's."""
    from streams.worker.scheduling.batch import BatchScores, by_profile, profile_of
    from streams.worker.scheduling.books import PendingBook
    from streams.worker.scheduling.held import Pending

    sched, now, _ = _world(32, 3)
    tasks = _tasks(40, 3, "k")
    tasks[7] = tasks[7].model_copy(update={"network_profile": "latency"})
    assert len({profile_of(t, sched.types) for t in tasks}) >= 2
    book = PendingBook({t.id: Pending(t, now) for t in tasks})
    rows = book.ready()
    assert [book.kinds[k] for k in book.kind[rows]] == [(t.network_profile, t.type) for t in tasks]
    nodes = sched.nodes(now)
    read, given = by_profile(sched, tasks, nodes, 4), by_profile(sched, tasks, nodes, 4, (book.kind[rows], book.kinds))
    for j, t in enumerate(tasks):
        (b1, r1), (b2, r2) = read(j), given(j)
        alone = BatchScores(sched, [t], nodes, profile_of(t, sched.types))
        assert b1.profile == b2.profile == profile_of(t, sched.types)
        np.testing.assert_array_equal(b1.composite[r1], alone.composite[0])
        np.testing.assert_array_equal(b2.composite[r2], alone.composite[0])


def test_the_compute_only_counterfactual_is_the_burst_scored_at_alpha_one():
    """An audited burst's compute-only scores come from the composite's own kernel pass: every task's
    row is score_all of the burst at alpha 1, bit for bit; without the audit none is scored."""
    from core.scoring import evolved, score_all
    from streams.worker.scheduling.batch import BatchScores

    sched, now, _ = _world(64, 7)
    burst = _tasks(40, 7, "c")
    nodes = sched.nodes(now)
    b = BatchScores(sched, burst, nodes, "balanced")
    assert "compute_only" in vars(b)  # filled by the constructor, not on first read
    want = score_all(evolved(b.x, alpha=np.ones(len(burst), np.float32)))
    assert b.compute_only.tobytes() == want.tobytes()
    assert not np.array_equal(b.compute_only, b.composite)
    sched.audit = False
    assert "compute_only" not in vars(BatchScores(sched, burst, nodes, "balanced"))


def test_tasks_loading_as_much_from_one_endpoint_read_one_row_of_load_scores():
    """decision.loads_at with the batch's rows: the same scores as core.scoring.load_scores at the
    nodes asked, one row per (endpoint, GB) computed once and read by every task that loads so."""
    from core.scoring import load_scores
    from streams.dev.synthetic import synthetic_inputs
    from streams.worker.scheduling.decision import loads_at

    x = synthetic_inputs(40, 30, 4, seed=3)
    x.data_ep[:] = np.where(np.arange(40) % 3 == 0, -1, np.arange(40) % 2)  # two endpoints, a third loads nothing
    x.data_gb[:] = np.where(np.arange(40) % 4 == 0, 200.0, 50.0)
    rows, at = {}, np.array([29, 0, 7, 7])
    for j in range(40):
        want = load_scores(x, j, at)
        got = loads_at(x, j, rows)(at)
        assert (got is None and want is None) or got.tolist() == want.tolist(), j
    assert len(rows) == 5  # none at 200 and 50 GB, endpoint 0 at both, endpoint 1 at 50 GB only
    first = rows[(0, 50.0)]
    loads_at(x, 2, rows)(at)  # endpoint 0, 50 GB again: the row kept, not computed again
    assert rows[(0, 50.0)] is first
