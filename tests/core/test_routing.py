"""core/routing.py: the split of origins' requests over replicas that answers them soonest on the whole —
worked examples written out, the optimality conditions, the kernel against the plain reference."""

import numpy as np
import pytest

from core.routing import split, split_reference, weights

BOTH = (split, split_reference)


def marginal(s, delay, mu, extra=None):
    """delay + extra + mu / (mu - X)^2 at each (origin, replica): equal on every replica an origin uses."""
    load = s.x.sum(axis=0)
    e = np.zeros(len(mu)) if extra is None else np.asarray(extra)
    return np.asarray(delay) + e[None, :] + (np.asarray(mu) / (np.asarray(mu) - load) ** 2)[None, :]


@pytest.mark.parametrize("f", BOTH)
def test_worked_example_a_big_and_a_small_replica(f):
    # one origin, 16 requests/s; replicas of 20 and 5 requests/s, no delay. Equal marginal costs:
    # 20 / (20 - x1)^2 = 5 / (5 - x2)^2  ->  20 - x1 = 2 (5 - x2)  ->  x1 = 10 + 2 x2; x1 + x2 = 16
    # -> x2 = 2, x1 = 14 (both at 20/36 = 5/9 = 0.556 s per request/s). At 10 requests/s: x2 = 0, x1 = 10.
    s = f([[0.0, 0.0]], [16.0], [20.0, 5.0], [True, True])
    np.testing.assert_allclose(s.x, [[14.0, 2.0]], atol=1e-6)
    assert not s.overloaded
    # its mean response: 14 at 1 / (20 - 14) and 2 at 1 / (5 - 2), over 16
    assert s.response_s[0] == pytest.approx((14 / 6 + 2 / 3) / 16, rel=1e-6)
    np.testing.assert_allclose(f([[0.0, 0.0]], [10.0], [20.0, 5.0], [True, True]).x, [[10.0, 0.0]], atol=1e-6)
    assert weights(s.x).tolist() == [[224, 32]]  # 14/16 and 2/16 of 256


@pytest.mark.parametrize("f", BOTH)
def test_a_far_replica_takes_load_only_once_the_near_one_queues(f):
    mu, delay = [10.0, 10.0], [[0.0, 0.05]]
    # 1 request/s: the near replica's marginal 10 / 81 = 0.123 is below the far one's 0.05 + 0.1 = 0.15
    np.testing.assert_allclose(f(delay, [1.0], mu, [True, True]).x, [[1.0, 0.0]], atol=1e-6)
    s = f(delay, [6.0], mu, [True, True])  # 6 requests/s: the near one alone would queue (10 / 16 = 0.625)
    assert 3.0 < s.x[0, 0] < 6.0 and s.x[0, 1] > 0
    m = marginal(s, delay, mu)
    assert m[0, 0] == pytest.approx(m[0, 1], rel=1e-6)


@pytest.mark.parametrize("f", BOTH)
def test_cold_unmeasured_and_empty_replicas_get_nothing(f):
    delay = [[0.01, np.nan, 0.02, 0.0]]  # the second: no probe measures the path from this origin
    s = f(delay, [4.0], [10.0, 10.0, 10.0, 0.0], [True, True, False, True])  # the third is cold, the fourth has no capacity
    assert s.x[0, 1:].tolist() == [0.0, 0.0, 0.0] and s.x[0, 0] == pytest.approx(4.0)
    assert weights(s.x).tolist() == [[256, 0, 0, 0]]


@pytest.mark.parametrize("f", BOTH)
def test_beyond_capacity_it_spreads_by_capacity_and_says_so(f):
    s = f([[0.0, 0.3]], [29.5], [20.0, 10.0], [True, True])  # 29.5 > 0.98 x 30
    assert s.overloaded
    np.testing.assert_allclose(s.x, [[29.5 * 2 / 3, 29.5 / 3]])
    # an origin nothing is open to gets nothing, and the others are split as if it were not there
    s = f([[0.0, 0.05], [np.nan, np.nan]], [1.0, 5.0], [10.0, 10.0], [True, True])
    assert not s.overloaded and s.x[1].tolist() == [0.0, 0.0] and np.isnan(s.response_s[1])
    np.testing.assert_allclose(s.x[0], [1.0, 0.0], atol=1e-6)


@pytest.mark.parametrize("f", BOTH)
def test_empty_and_constant_inputs(f):
    s = f(np.zeros((0, 3)), [], [1.0, 2.0, 3.0], [True] * 3)
    assert s.x.shape == (0, 3) and not s.overloaded
    s = f(np.zeros((2, 0)), [0.0, 0.0], [], [])
    assert s.x.shape == (2, 0) and not s.overloaded
    s = f(np.full((3, 4), 0.02), [2.0, 2.0, 2.0], np.full(4, 5.0), [True] * 4)  # all alike: an equal share
    np.testing.assert_allclose(s.x, np.full((3, 4), 0.5), atol=1e-6)
    with pytest.raises(ValueError):
        f([[0.0]], [1.0, 2.0], [1.0], [True])
    with pytest.raises(ValueError):
        f([[0.0]], [-1.0], [1.0], [True])


def test_two_origins_share_replicas_at_the_optimum_and_the_kernel_matches_the_reference():
    rng = np.random.default_rng(7)
    for _ in range(25):
        o, r = int(rng.integers(1, 6)), int(rng.integers(1, 8))
        delay = rng.uniform(0.0, 0.2, (o, r))
        delay[rng.random((o, r)) < 0.15] = np.nan
        mu = rng.uniform(5.0, 50.0, r)
        warm = rng.random(r) < 0.85
        extra = rng.uniform(0.0, 0.02, r)
        lam = rng.uniform(0.0, 1.0, o) * 0.6 * mu.sum() / o
        a = split(delay, lam, mu, warm, extra)
        b = split_reference(delay, lam, mu, warm, extra)
        assert a.overloaded == b.overloaded
        np.testing.assert_allclose(a.x, b.x, atol=1e-6)
        if a.overloaded:
            continue
        open_ = np.isfinite(delay) & warm[None, :]
        reached = open_.any(axis=1)  # an origin nothing is open to gets nothing
        np.testing.assert_allclose(a.x.sum(axis=1), np.where(reached, lam, 0.0), rtol=1e-9)
        m = marginal(a, np.nan_to_num(delay, nan=np.inf), mu, extra)
        for i in range(o):
            used = a.x[i] > 1e-6
            if lam[i] <= 0 or not used.any():
                continue
            level = m[i, used].mean()
            np.testing.assert_allclose(m[i, used], level, rtol=1e-4)  # every used replica at one level
            assert (m[i, open_[i] & ~used] >= level * (1 - 1e-4)).all()  # none left out is cheaper
            assert (a.x[i, ~open_[i]] == 0).all()
