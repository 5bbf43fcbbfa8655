"""A burst decided in one batch (decide_many: one node view, one kernel call per profile) decides
exactly what deciding its tasks one call each decides: same nodes, same statuses, same books —
gangs, stores at rack level, and more tasks than the cluster holds included."""

import numpy as np
import pytest

from streams.dev.bench.decide import _tasks, _world


@pytest.mark.parametrize("nodes,tasks,seed", [(64, 40, 0), (64, 150, 1), (200, 120, 2)])
def test_batch_decides_what_one_call_each_decides(nodes, tasks, seed):
    one, now, _ = _world(nodes, seed)
    many, _, _ = _world(nodes, seed)
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
