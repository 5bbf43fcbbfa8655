"""Gangs move too: when the path between two members of a data-parallel gang degrades, the gang is
re-placed (only the members that change move), under the same gain, cost and patience rules."""

import itertools
import time

import numpy as np
import pytest

from core.placement import gang_value
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def scheduler(now):
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {(n, "store"): {"rtt_ms": win(now, 0.5)} for n in nodes}
    # only n0 <-> n1 is close: once it degrades no pair beats another, and the gang keeps n0 (were
    # n2 <-> n3 close too, the whole gang would go there: placement looks for the best whole gang)
    for a, b, p95 in (("n0", "n1", 0.5), ("n2", "n3", 5.0), ("n0", "n2", 5.0), ("n0", "n3", 5.0),
                      ("n1", "n2", 5.0), ("n1", "n3", 5.0)):
        paths[(a, b)] = {"rtt_ms": win(now, p95)}
    return make_scheduler([gpu_node(n, now) for n in nodes], paths)


def test_gang_value_worked_example():
    # first member's composite 80, the others' peer scores 60 and 70: (80 + 60 + 70) / 3
    assert gang_value([80.0, 1.0, 2.0, 3.0], [0.0, 60.0, 70.0, 5.0], [0, 1, 2]) == 70.0


def test_a_gang_moves_off_a_degraded_member_path():
    now = time.time()
    s = scheduler(now)
    s.placement_rule = "points"  # moved in points (in seconds: test_moves)
    task = Task(id="g", type="training-data-parallel", peers=2, resources={"cards": 1}, checkpoint_gb=1,
                expected_duration_s=7200, data_source={"node": "store", "size_gb": 1})
    d = s.decide(task, now)
    assert d.nodes == ["n0", "n1"]  # the followers go where the path to the first is best
    assert s.reschedule(now + 1) == []  # nothing wrong: the gang stays
    # the n0 <-> n1 path degrades: 200 ms p95 and 10 % loss
    rec = s.net.get_key(b"n0|n1")
    s.net.put(b"n0|n1", {**rec, "metrics": {"rtt_ms": win(now + 10, 200.0, lost=10)}})
    s.touch()
    (ev,) = s.reschedule(now + 11)
    assert (ev.task_id, ev.from_nodes, ev.to_nodes, ev.trigger) == ("g", ["n0", "n1"], ["n0", "n2"], "degradation")
    assert ev.after.composite - ev.before.composite >= 10  # the policy's minimum gain in points
    assert ev.expected_gain_s > ev.migration_cost_s * 1.2
    assert s.running["g"].nodes == ["n0", "n2"]
    assert s.reschedule(now + 12) == []  # resting after the move
    # the allocation moved with it: n1 has its card back, n2 holds one
    view = s.nodes(now + 12)
    free = {n: float(view.usable[view.index[n], 0]) for n in ("n1", "n2")}
    assert free["n1"] - free["n2"] == 1.0


class _Rows:
    """What GangScorer reads of NetworkInputs: quality from node m to every node, one row or all."""

    def __init__(self, q):
        self.q = q

    def from_node(self, name, m):
        assert name == "q"
        return self.q[m].astype(np.float32)

    def filled_quality(self, unknown):
        q = self.q.astype(np.float32).astype(np.float64)
        return np.where(np.isnan(q), unknown, q)


def test_the_search_is_skipped_only_where_no_gang_can_beat_the_current_by_the_minimum():
    """migration._headroom bounds every gang's value (GangScorer.value) from above over the nodes
    that fit a worker: on random clusters no gang that fits is worth more than the bound (so skipping
    the search loses no move), and a gang already on the best nodes there are is not searched for."""
    from streams.worker.scheduling.gangs import GangScorer
    from streams.worker.scheduling.migration import _could_gain, _headroom

    rng = np.random.default_rng(4)
    need = np.array([2.0, 0.0, 0.0], np.float32)
    for case in range(300):
        n, k = int(rng.integers(3, 9)), int(rng.integers(2, 4))
        alpha = float(rng.uniform(0, 1)) if case % 2 else np.float32(rng.uniform(0, 1))  # types keep float32
        q = rng.uniform(0, 100, (n, n))
        q[rng.random((n, n)) < 0.2] = np.nan
        scores = rng.uniform(0, 100, n)
        scores[rng.random(n) < 0.2] = -np.inf
        usable = np.c_[rng.integers(0, 5, n), np.zeros(n), np.zeros(n)].astype(np.float32)
        g = GangScorer(alpha, scores, rng.uniform(0, 100, n), _Rows(q), 50.0, None, 0.0)
        fits = np.flatnonzero(np.isfinite(scores) & (usable[:, 0] >= 2))
        if fits.size < k:
            assert not _could_gain(_headroom(g, scores, usable, need, k, -1e9), 10.0)  # nothing fits: nothing to search
            continue
        best = max(g.value([lead, *others]) for lead in fits.tolist()
                   for others in itertools.combinations([m for m in fits.tolist() if m != lead], k - 1))
        assert _could_gain(_headroom(g, scores, usable, need, k, best - 10.0), 10.0)  # no gang above the bound
        # the bound over every node's capacity, with the scores before the room's mask (a node without
        # room now scored too), bounds every gang once any room comes back (steady: gap_any)
        unmasked = np.where(np.isfinite(scores), scores, rng.uniform(0, 100, n))
        unmasked[rng.random(n) < 0.1] = -np.inf  # unavailable: never a worker
        room = np.isfinite(unmasked) & (rng.random(n) < 0.8)  # capacity for a worker
        cap = np.flatnonzero(room | (np.isfinite(unmasked) & (usable[:, 0] >= 2)))
        if cap.size >= k:
            g_any = GangScorer(alpha, unmasked, g.compute, _Rows(q), 50.0, None, 0.0)
            most = max(g_any.value([lead, *others]) for lead in cap.tolist()
                       for others in itertools.combinations([m for m in cap.tolist() if m != lead], k - 1))
            fits_any = np.zeros(n, bool)
            fits_any[cap] = True
            assert g.upper_bound(fits_any, k, unmasked) >= most - 1e-9
    # worked: two identical fast nodes, quality 96 between them, alpha 0.3, compute 100, scores 98.8:
    # the bound is (98.8 + 0.3 x 100 + 0.7 x 96) / 2 = 98.0 (the best quality another fitting node has
    # to a worker is 96), which is what the gang there is worth: no search
    q = np.array([[100.0, 96.0], [96.0, 100.0]])
    g = GangScorer(0.3, np.array([98.8, 98.8]), np.array([100.0, 100.0]), _Rows(q), 50.0, None, 0.0)
    usable = np.array([[8, 0, 0], [8, 0, 0]], np.float32)
    assert abs(g.value([0, 1]) - 98.0) < 1e-9
    assert not _could_gain(_headroom(g, g.scores, usable, need, 2, g.value([0, 1])), 10.0)
    assert _headroom(g, g.scores, usable, need, 2, 0.0) == pytest.approx(98.0)
    assert _could_gain(_headroom(g, g.scores, usable, need, 2, 87.9), 10.0)  # 10.1 below: it searches
    assert not _could_gain(_headroom(g, g.scores, usable, need, 2, 88.1), 10.0)  # 9.9: it need not
