import math

import numpy as np
import pytest

from core.quality import DEFAULT_MODEL, Curve, combine, mean_by_group, path_quality, utility


def test_linear_utility_worked_example():
    # loss curve: good 0, bad 0.05 -> 0.01 is 4/5 of the way from bad: 80
    u = utility(np.array([0.0, 0.01, 0.05, 0.2, np.nan]), Curve(0.0, 0.05))
    assert u[:4].tolist() == pytest.approx([100.0, 80.0, 0.0, 0.0])
    assert math.isnan(u[4])


def test_log_utility_worked_example():
    # rtt curve: good 0.5 ms, bad 300 ms, log scale. 90 ms: (ln 300 - ln 90) / (ln 300 - ln 0.5)
    # = 1.2040 / 6.3969 = 0.18821 -> 18.82
    u = utility(np.array([0.3, 0.5, 90.0, 300.0, 1000.0]), Curve(0.5, 300.0, log=True))
    assert u.tolist() == pytest.approx([100.0, 100.0, 18.821, 0.0, 0.0], abs=1e-3)


def test_higher_is_better_curve():
    # bandwidth headroom: good 0.7, bad 0 -> headroom 0.35 is 50
    assert utility(np.array([0.35, 0.9]), Curve(0.7, 0.0)).tolist() == [50.0, 100.0]


def test_balanced_quality_worked_example():
    # p95 90 ms -> 18.821; loss 0.01 -> 80; bw_util 0.65 (headroom 0.35) -> 50; retrans 0 -> 100;
    # jitter 5 ms: (ln 50 - ln 5) / (ln 50 - ln 0.05) = 2.3026 / 6.9078 = 0.33333 -> 33.333
    # balanced weights .35 .25 .15 .10 .15:
    # 0.35*18.821 + 0.25*80 + 0.15*50 + 0.10*100 + 0.15*33.333 = 6.587 + 20 + 7.5 + 10 + 5 = 49.087
    q = path_quality(np.array([90.0]), np.array([0.01]), np.array([0.65]), np.array([0.0]), np.array([5.0]))
    assert q[0] == pytest.approx(49.087, abs=1e-3)


def test_missing_dimensions_renormalise_the_weights():
    # only rtt (100) and loss (0) known, balanced: (0.35*100 + 0.25*0) / 0.60 = 58.333
    q = path_quality(np.array([0.2]), np.array([0.1]), np.array([np.nan]), np.array([np.nan]), np.array([np.nan]))
    assert q[0] == pytest.approx(58.333, abs=1e-3)
    nothing = path_quality(*([np.array([np.nan])] * 5))
    assert math.isnan(nothing[0])


def test_profiles_rank_a_fast_busy_path_and_a_slow_idle_path_differently():
    fast_busy = dict(rtt=0.3, loss=0.0, util=0.95, retrans=0.0, jitter=0.05)
    slow_idle = dict(rtt=40.0, loss=0.0, util=0.05, retrans=0.0, jitter=2.0)
    cols = [np.array([a[k], b[k]]) for k, a, b in
            ((k, fast_busy, slow_idle) for k in ("rtt", "loss", "util", "retrans", "jitter"))]
    lat = path_quality(*cols, profile="latency")
    bw = path_quality(*cols, profile="bandwidth")
    assert lat[0] > lat[1] and bw[1] > bw[0]


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown network profile 'fast'"):
        DEFAULT_MODEL.weights("fast")


def test_combine_and_group_means_on_edge_inputs():
    assert combine(np.zeros((0, 5)), DEFAULT_MODEL.weights("balanced")).shape == (0,)
    m = mean_by_group(np.array([0, 0, 2]), np.array([10.0, 20.0, np.nan]), 3)
    assert m[0] == 15.0 and math.isnan(m[1]) and math.isnan(m[2])


def test_worse_direction_takes_the_reverse_path_where_it_is_measured():
    from core.quality import worse_direction

    # paths 0->1 (90), 1->0 (40), 0->2 (70; 2->0 unmeasured), 2->1 (NaN), 1->2 (60)
    q = np.array([90.0, 40.0, 70.0, np.nan, 60.0], np.float32)
    src, dst = np.array([0, 1, 0, 2, 1]), np.array([1, 0, 2, 1, 2])
    assert worse_direction(q, src, dst).tolist()[:3] == [40.0, 40.0, 70.0]
    out = worse_direction(q, src, dst)
    assert out[3] == 60.0 and out[4] == 60.0  # a path without data takes its reverse's; a NaN reverse leaves 60
    assert out.dtype == np.float32 and worse_direction(np.zeros(0), np.zeros(0), np.zeros(0)).size == 0


def test_aged_quality_worked_example_and_edges():
    from core.quality import Freshness, aged_quality

    fr = Freshness(fresh_s=60.0, stale_s=300.0)
    # q 90: fresh at 0 and 60 s; at 180 s c = 1 - 120/240 = 0.5 -> 50 + 0.5 x 40 = 70; at 300 s unknown
    got = aged_quality(np.array([90.0, 90.0, 90.0, 90.0, 10.0, np.nan]),
                       np.array([0.0, 60.0, 180.0, 300.0, 240.0, 0.0]), fr)
    assert got[:3].tolist() == [90.0, 90.0, 70.0] and np.isnan(got[3])
    assert got[4] == pytest.approx(50 + 0.25 * (10 - 50))  # a bad path climbs towards unknown too
    assert np.isnan(got[5])  # no quality stays none
    assert fr.confidence(np.nan) == 0.0 and aged_quality(np.array([]), np.array([]), fr).size == 0
    assert [fr.state(a) for a in (0.0, 60.0, 61.0, 299.0, 300.0, float("nan"))] == [
        "fresh", "fresh", "aging", "aging", "stale", "stale"]
    with pytest.raises(ValueError):
        Freshness(300.0, 60.0)


def test_combine_compiled_equals_its_numpy_reference_exactly():
    """The compiled combine against the plain one: random utilities with NaN holes (rows all NaN among
    them), empty, constant, one path alone, and weights per path (the reference's own case)."""
    from core.quality import combine_reference

    rng = np.random.default_rng(11)
    w = DEFAULT_MODEL.weights("balanced")
    u = rng.uniform(0, 100, (4000, 5))
    u[rng.random(u.shape) < 0.3] = np.nan
    u[:7] = np.nan
    for case in (u, np.zeros((0, 5)), np.full((9, 5), 42.0), u[10], u[:12].reshape(3, 4, 5)):
        got, ref = combine(case, w), combine_reference(case, w)
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
    assert np.isnan(combine(u[:7], w)).all() and (combine(np.full((9, 5), 42.0), w) == 42.0).all()
    per_path = rng.uniform(0, 1, (4000, 5))
    np.testing.assert_array_equal(combine(u, per_path), combine_reference(u, per_path))
