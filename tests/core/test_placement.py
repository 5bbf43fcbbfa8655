import numpy as np
import pytest

from core.placement import place, rank, ranked, top, top_where
from core.quota import queue_order

INF = -np.inf


def test_rank_best_first_ties_to_lower_index_infeasible_left_out():
    assert rank(np.array([50.0, 80.0, INF, 80.0, 10.0])).tolist() == [1, 3, 0, 4]
    assert rank(np.array([INF, INF])).tolist() == []


def test_fallback_on_a_failed_reservation():
    scores = np.array([70.0, 90.0, 80.0])
    usable = np.array([[8.0], [8.0], [8.0]])
    p = place(scores, np.array([4.0]), usable, reserve=lambda n: n != 1)  # node 1 refuses
    assert p.nodes == [2] and p.fallbacks == [(1, "reservation_failed")]
    assert usable[:, 0].tolist() == [8.0, 8.0, 4.0]


def test_reservations_use_up_capacity_for_later_jobs():
    usable = np.array([[8.0], [8.0]])
    scores = np.array([90.0, 50.0])
    assert place(scores, np.array([6.0]), usable).nodes == [0]
    # node 0 has 2 left: the next 6-card job goes to node 1 although node 0 scores better
    assert place(scores, np.array([6.0]), usable).nodes == [1]
    assert not place(scores, np.array([6.0]), usable).placed


def test_gang_all_or_nothing():
    usable = np.array([[8.0], [8.0], [2.0]])
    scores = np.array([60.0, 90.0, 70.0])
    released = []
    p = place(scores, np.array([4.0]), usable, gang=3, unreserve=released.append)
    assert not p.placed and "gang incomplete: 2 of 3" in p.fallbacks[-1][1]
    assert usable[:, 0].tolist() == [8.0, 8.0, 2.0]  # everything given back
    assert sorted(released) == [0, 1]
    p = place(scores, np.array([4.0]), usable, gang=2)
    assert p.nodes == [1, 0]


def test_gang_members_follow_the_quality_to_the_first_worker():
    # node 1 is best for the job; from node 1, node 3 is much closer than node 2
    scores = np.array([10.0, 90.0, 85.0, 60.0])
    usable = np.full((4, 1), 8.0)
    to_first = {0: np.zeros(4), 1: np.array([0.0, 0.0, 20.0, 95.0]), 2: np.array([0.0, 20.0, 0.0, 10.0]),
                3: np.array([0.0, 95.0, 20.0, 0.0])}
    # gangs led by 1: (90 + 95) / 2 = 92.5; by 2: (85 + 20) / 2 = 52.5; by 3: (60 + 95) / 2 = 77.5
    p = place(scores, np.array([8.0]), usable, gang=2, peer_scores=lambda c: to_first[c[0]])
    assert p.nodes == [1, 3]


def test_the_first_worker_is_the_one_that_leads_the_best_gang():
    # node 0 is a shade better alone, but its co-workers would sit across the fabric (40); node 1's
    # rack has room for one (95). Led by 0: (90 + 40) / 2 = 65; led by 1: (89 + 95) / 2 = 92
    scores = np.array([90.0, 89.0, 50.0, 50.0])
    to_first = {0: np.array([0.0, 40.0, 40.0, 40.0]), 1: np.array([40.0, 0.0, 95.0, 95.0]),
                2: np.array([40.0, 95.0, 0.0, 95.0]), 3: np.array([40.0, 95.0, 95.0, 0.0])}
    peer = lambda c: to_first[c[0]]  # noqa: E731
    assert place(scores, np.array([8.0]), np.full((4, 1), 8.0), gang=2, peer_scores=peer).nodes == [1, 2]
    # without looking ahead: the best node first, then its best co-worker (ties: lower index)
    assert place(scores, np.array([8.0]), np.full((4, 1), 8.0), gang=2, peer_scores=peer, lookahead=1).nodes == [0, 1]
    # node 1 refuses: the next best leader (2, (50 + 95) / 2 = 72.5 > 65) leads, never a half gang
    p = place(scores, np.array([8.0]), np.full((4, 1), 8.0), gang=2, peer_scores=peer, reserve=lambda n: n != 1)
    assert p.nodes == [2, 3] and p.fallbacks == [(1, "reservation_failed")]


def test_anti_starvation_order():
    # tasks: 0 prio 90 new, 1 prio 10 waited 700 s (starving at 600), 2 prio 50, 3 prio 10 waited 900 s
    order = queue_order(np.array([90, 10, 50, 10]), np.zeros(4), np.array([5.0, 700.0, 1.0, 900.0]), max_wait_s=600)
    assert order.tolist() == [3, 1, 0, 2]
    # nobody starving: priority, then the one who waited longer
    assert queue_order(np.array([50, 50, 70]), np.zeros(3), np.array([1.0, 9.0, 0.0]), 600).tolist() == [2, 1, 0]


def test_gang_workers_are_chosen_and_valued_by_their_quality_to_all_co_workers():
    # issue 27 finding 5: from node 0, nodes 1 and 2 are the closest (95, 90), but 1 and 2 are far
    # apart (10); node 3 is close to both 0 and 1 (85, 90). With the quality to the first only the gang
    # was {0, 1, 2}; with every pair, after {0, 1} node 3's mean (85 + 90) / 2 = 87.5 beats node 2's
    # (90 + 10) / 2 = 50.
    from core.placement import pair_means

    q = np.array([[100, 95, 90, 85], [95, 100, 10, 90], [90, 10, 100, 90], [85, 90, 90, 100]], float)
    assert pair_means(q[np.ix_([0, 1, 2], [0, 1, 2])], 50.0).tolist() == [92.5, 52.5, 50.0]
    assert pair_means(np.array([[100.0, np.nan], [np.nan, 100.0]]), 50.0).tolist() == [50.0, 50.0]
    assert pair_means(np.array([[100.0]]), 50.0).tolist() == [50.0]
    scores = np.array([90.0, 80.0, 80.0, 80.0])

    def peer(chosen):
        return q[list(chosen)].mean(axis=0)

    def value(members):
        return float((scores[members[0]] + pair_means(q[np.ix_(members, members)], 50.0)[1:].sum()) / len(members))

    p = place(scores, np.array([8.0]), np.full((4, 1), 8.0), gang=3, peer_scores=peer, value_of=value)
    assert p.nodes == [0, 1, 3]
    # worked value: (90 + mean(95, 90) + mean(85, 90)) / 3 = (90 + 92.5 + 87.5) / 3 = 90
    assert value([0, 1, 3]) == pytest.approx(90.0) and value([0, 1, 2]) == pytest.approx((90 + 52.5 + 50) / 3)


def test_the_feasibility_rule_and_the_kernels_agree():
    # core.feasibility is the one rule; the scoring kernel applies the same comparison in its loop:
    # on random books, a node is scored (finite) exactly where it is available and covers the need
    from core.feasibility import covers, fitting
    from core.scoring import ScoringInputs, score_reference

    rng = np.random.default_rng(3)
    n = 40
    usable = rng.integers(0, 9, (n, 3)).astype(np.float32)
    available = rng.random(n) > 0.2
    needs = rng.integers(0, 9, (6, 3)).astype(np.float32)
    x = ScoringInputs(compute=np.full((n, 1), 50, np.float32), usable=usable, available=available,
                      node_class=np.zeros(n, np.int64), has_accel=np.ones(n, bool),
                      node_quality=np.full(n, 50, np.float32), quality=np.zeros((0, n), np.float32),
                      bandwidth_gbps=np.zeros((0, n), np.float32), kind=np.zeros(6, np.int64),
                      alpha=np.full(6, 0.5, np.float32), need=needs, class_mask=np.zeros(6, np.int64),
                      ep_ptr=np.zeros(7, np.int64), ep_idx=np.zeros(0, np.int64), data_ep=np.full(6, -1, np.int64),
                      data_gb=np.zeros(6, np.float32), accel_penalty=np.zeros(6, np.float32))
    scored = np.isfinite(score_reference(x))
    for j in range(6):
        assert (scored[j] == fitting(usable, needs[j], available)).all()
    # the queue's count per shape (covers over every node at once) says the same
    counts = (covers(usable[None, :, :], needs[:, None, :]) & available).sum(axis=1)
    assert counts.tolist() == scored.sum(axis=1).tolist()
    assert covers(np.array([8.0, 640, 1024]), np.array([8.0, 640, 1024]))  # an exact fit fits
    assert not covers(np.array([7.0, 640, 1024]), np.array([8.0, 0, 0]))


@pytest.mark.parametrize("shapes", [((40, 3), (3,)), ((1, 40, 3), (6, 1, 3)), ((40, 3), (6, 1, 3)),
                                    ((3,), (3,)), ((0, 3), (3,)), ((1, 0, 3), (6, 1, 3)), ((40, 3), (0, 1, 3))])
def test_covers_is_every_resource_at_once(shapes):
    """covers (a resource at a time) against np.all(usable >= need) over broadcast shapes, NaN (never
    covers, never covered), equal values and empty sides."""
    from core.feasibility import covers

    rng = np.random.default_rng(len(str(shapes)))
    usable = rng.integers(0, 4, shapes[0]).astype(np.float32)
    need = rng.integers(0, 4, shapes[1]).astype(np.float32)
    if usable.size:
        usable.flat[::7] = np.nan
    if need.size:
        need.flat[::5] = np.nan
    got, want = covers(usable, need), np.all(usable >= need, axis=-1)
    assert np.shape(got) == want.shape and np.array_equal(got, want)
    assert covers(np.zeros((4, 0)), np.zeros(0)).tolist() == [True] * 4  # no resources: nothing to cover


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_is_rank_prefix_on_ties_nan_inf_empty_and_constant(dtype):
    """top(scores, k) == rank(scores)[:k] (best first, ties to the lower index, only finite scores)
    for the one-pass kernel (small k) and the partition path (large k)."""
    rng = np.random.default_rng(3)
    cases = [np.zeros(0), np.full(7, 5.0), np.full(5, np.nan), np.array([-np.inf, np.inf, 1.0, 1.0, np.nan, 2.0])]
    for _ in range(200):
        v = rng.integers(0, 6, size=int(rng.integers(1, 300))).astype(np.float64)  # many ties
        v[rng.random(v.size) < 0.2] = -np.inf
        v[rng.random(v.size) < 0.05] = np.nan
        cases.append(v)
    for v in cases:
        v = v.astype(dtype)
        for k in (1, 3, 8, 64, 65, 500):
            assert top(v, k).tolist() == rank(v)[:k].tolist(), (v, k)
    assert top(np.array([3.0, 9.0, 9.0, 1.0]), 2).tolist() == [1, 2]  # worked: ties keep index order


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_where_is_top_of_the_masked_scores(dtype):
    """top_where(scores, ok, k) == top(where(ok, scores, -inf), k): ties, NaN, infinities, no node
    allowed, every node allowed, k past the one-pass kernel's."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        v = rng.integers(0, 5, size=int(rng.integers(0, 200))).astype(dtype)
        v[rng.random(v.size) < 0.1] = np.nan
        v[rng.random(v.size) < 0.1] = -np.inf
        for ok in (rng.random(v.size) < 0.6, np.zeros(v.size, bool), np.ones(v.size, bool)):
            for k in (0, 1, 4, 64, 65):
                assert top_where(v, ok, k).tolist() == top(np.where(ok, v, -np.inf), k).tolist(), (v, ok, k)
    # worked: the best two of the allowed nodes 0, 2 and 3 (node 1 scores most but is not allowed)
    assert top_where(np.array([5.0, 9.0, 5.0, 7.0]), np.array([1, 0, 1, 1], bool), 2).tolist() == [3, 0]


def test_packed_ranks_best_fit_within_the_band_worked_example():
    from core.placement import packed

    scores, left = np.array([90.0, 80.0, 60.0, -np.inf]), np.array([7.0, 1.0, 0.0, 0.0])
    # within 20 of 90: nodes 0 and 1; node 1 leaves 1 card (fuller) -> first; node 2 (60) after by score
    assert rank(packed(scores, left, 20.0)).tolist() == [1, 0, 2]
    assert rank(packed(scores, left, 30.0)).tolist() == [2, 1, 0]  # 60 is in the tier and fills its node
    assert rank(packed(scores, left, 0.0)).tolist() == [0, 1, 2]  # off: the score alone
    # equal fits: the score, then the index
    assert rank(packed(np.array([70.0, 75.0, 75.0]), np.array([3.0, 3.0, 3.0]), 10.0)).tolist() == [1, 2, 0]
    assert not np.isfinite(packed(np.full(2, -np.inf), np.zeros(2), 20.0)).any()


def test_packed_against_a_plain_sort():
    from core.placement import packed

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        scores = np.round(rng.uniform(0, 100, n), 1)
        scores[rng.random(n) < 0.2] = -np.inf
        left = rng.integers(0, 8, n).astype(float)
        band = float(rng.choice([0.0, 5.0, 20.0, 100.0]))
        ok = [i for i in range(n) if np.isfinite(scores[i])]
        if not ok:
            continue
        best = max(scores[i] for i in ok)
        tier = [i for i in ok if band > 0 and scores[i] >= best - band]
        rest = [i for i in ok if i not in tier]
        want = sorted(tier, key=lambda i: (left[i], -scores[i], i)) + sorted(rest, key=lambda i: (-scores[i], i))
        assert rank(packed(scores, left, band)).tolist() == want


def test_ranked_scores_place_the_order_first_to_last():
    assert ranked(np.array([2, 0]), 3).tolist() == [1.0, -np.inf, 2.0]
    assert rank(ranked(np.array([3, 1, 4]), 6)).tolist() == [3, 1, 4]  # the order back, nothing else
    assert np.isneginf(ranked(np.zeros(0, np.int64), 4)).all()
