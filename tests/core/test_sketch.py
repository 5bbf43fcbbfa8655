import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.sketch import (
    DEFAULT_MAPPING,
    MAX_KEY,
    Mapping,
    keys_reference,
    merge_sets,
    sketch_groups,
    sketch_groups_reference,
)
from core.sketch_stats import sketch_stats, sketch_stats_reference, stats_many
from core.windowstats import window_stats_reference

INPUTS = {
    "empty": np.array([]),
    "all_lost": np.array([np.nan, np.nan]),
    "constant": np.full(50, 0.25),
    "one": np.array([3.0]),
    "zeros_and_burst": np.r_[np.zeros(9), 0.3],
    "negative_and_positive": np.random.default_rng(1).normal(0, 1, 2000),
    "below_min_value": np.array([1e-9, 0.0, -1e-8, 5e-7]),
    "huge_range": np.r_[np.random.default_rng(2).lognormal(0, 0.2, 500), 1e300, 1e-5],
    "with_nan": np.r_[np.random.default_rng(3).lognormal(0, 1, 999), np.nan],
}


def assert_groups_equal(a, b):
    for f in ("code", "count", "lost", "vmin", "vmax", "start", "key", "bcount"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    np.testing.assert_allclose(a.bsum, b.bsum, rtol=1e-12)


@pytest.mark.parametrize("name", INPUTS)
def test_kernel_matches_reference_on_edge_inputs(name):
    v = INPUTS[name]
    codes = np.arange(v.size) % 3
    a, b = sketch_groups(codes, v), sketch_groups_reference(codes, v)
    assert_groups_equal(a, b)
    for g in range(len(a)):
        sl = slice(a.start[g], a.start[g + 1])
        args = (a.key[sl], a.bcount[sl], a.bsum[sl], a.count[g], a.lost[g], a.vmin[g], a.vmax[g])
        got, ref = sketch_stats(*args), sketch_stats_reference(*args)
        assert got.keys() == ref.keys()
        for f in got:
            if isinstance(ref[f], float) and math.isnan(ref[f]):
                assert math.isnan(got[f]), f
            else:
                assert got[f] == pytest.approx(ref[f], rel=1e-9, abs=1e-12), f


def test_empty_batch_gives_no_group():
    g = sketch_groups(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert len(g) == 0 and g.start.tolist() == [0]


def test_keys_are_monotonic_and_bounded():
    v = np.sort(np.r_[-np.logspace(-8, 12, 500), 0.0, np.logspace(-8, 12, 500)])
    k = keys_reference(v, Mapping())
    assert np.all(np.diff(k) >= 0) and np.abs(k).max() <= MAX_KEY
    np.testing.assert_array_equal(sketch_groups(np.zeros(v.size, np.int64), v).key, np.unique(k))


def test_constant_input_is_exact():
    s = sketch_stats_from(np.full(100, 0.25))
    assert (s["kept"], s["outliers"]) == (100, 0)
    assert s["mean"] == s["p50"] == s["p99"] == s["min"] == s["max"] == 0.25


def sketch_stats_from(v, mapping=DEFAULT_MAPPING):
    g = sketch_groups(np.zeros(v.size, dtype=np.int64), v, mapping)
    return sketch_stats(g.key, g.bcount, g.bsum, g.count[0], g.lost[0], g.vmin[0], g.vmax[0], mapping)


@pytest.mark.parametrize("seed", range(8))
def test_accuracy_against_exact_hampel_filtered_statistics(seed):
    rng = np.random.default_rng(seed)
    n = 20_000
    v = rng.lognormal(np.log(0.2), 0.25, n)  # RTT-like body, ms
    spikes = rng.random(n) < rng.uniform(0.01, 0.05)
    v[spikes] *= rng.uniform(10, 100, spikes.sum())  # 10-100x the median
    lost = rng.random(n) < 0.002
    v[lost] = np.nan
    got, exact = sketch_stats_from(v), window_stats_reference(v)
    assert got["lost"] == exact["lost"] == lost.sum()
    assert got["count"] == n
    assert got["outliers"] >= int((spikes & ~lost).sum())  # every clear spike is an outlier
    assert got["max"] < np.nanmin(v[spikes & ~lost])
    assert got["mean"] == pytest.approx(exact["mean"], rel=0.005)
    for f in ("p50", "p95", "p99"):
        assert got[f] == pytest.approx(exact[f], rel=0.01), f


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.just(math.nan)), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=300),
)
def test_merging_the_sketches_of_two_halves_gives_the_sketch_of_the_whole(values, cut):
    v = np.array(values)
    cut = min(cut, v.size)
    whole = sketch_groups(np.zeros(v.size, np.int64), v)
    a = sketch_groups(np.zeros(cut, np.int64), v[:cut])
    b = sketch_groups(np.zeros(v.size - cut, np.int64), v[cut:])
    parts = [p for p in (a, b) if len(p)]
    merged = merge_sets(
        1,
        np.zeros(sum(p.key.size for p in parts), np.int64),
        np.concatenate([p.key for p in parts]), np.concatenate([p.bcount for p in parts]),
        np.concatenate([p.bsum for p in parts]),
        np.zeros(len(parts), np.int64), np.concatenate([p.count for p in parts]),
        np.concatenate([p.lost for p in parts]), np.concatenate([p.vmin for p in parts]),
        np.concatenate([p.vmax for p in parts]),
    )
    np.testing.assert_array_equal(merged.key, whole.key)
    np.testing.assert_array_equal(merged.bcount, whole.bcount)
    np.testing.assert_allclose(merged.bsum, whole.bsum, rtol=1e-9, atol=1e-6)
    assert (merged.count[0], merged.lost[0]) == (whole.count[0], whole.lost[0])
    assert (merged.vmin[0], merged.vmax[0]) == (whole.vmin[0], whole.vmax[0])


def test_merge_does_not_mutate_its_inputs():
    g = sketch_groups(np.zeros(100, np.int64), np.linspace(1, 2, 100))
    before = (g.key.copy(), g.bcount.copy(), g.bsum.copy())
    merge_sets(1, np.zeros(g.key.size, np.int64), g.key, g.bcount, g.bsum,
               np.zeros(1, np.int64), g.count, g.lost, g.vmin, g.vmax)
    for x, y in zip(before, (g.key, g.bcount, g.bsum), strict=True):
        np.testing.assert_array_equal(x, y)


def test_stats_many_equals_one_by_one():
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 20, 5000)
    v = rng.lognormal(0, 0.5, 5000)
    g = sketch_groups(codes, v)
    sset = merge_sets(len(g), np.repeat(np.arange(len(g)), np.diff(g.start)), g.key, g.bcount,
                      g.bsum, np.arange(len(g)), g.count, g.lost, g.vmin, g.vmax)
    many = stats_many(sset)
    for i in range(len(g)):
        sl = slice(g.start[i], g.start[i + 1])
        one = sketch_stats(g.key[sl], g.bcount[sl], g.bsum[sl], g.count[i], g.lost[i], g.vmin[i], g.vmax[i])
        assert list(one.values()) == pytest.approx(many[i].tolist(), rel=1e-12)


def test_bucket_count_is_bounded_by_the_value_range_not_the_sample_count():
    few = sketch_groups(np.zeros(1000, np.int64), np.random.default_rng(0).uniform(1, 10, 1000))
    many = sketch_groups(np.zeros(200_000, np.int64), np.random.default_rng(0).uniform(1, 10, 200_000))
    bound = math.ceil(math.log(10) / math.log(Mapping().gamma)) + 1
    assert few.key.size <= bound and many.key.size <= bound


def test_sparse_group_codes_take_the_hashed_path_and_agree():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 50, 3000) * 10**12 + 7  # far beyond the direct-table range
    v = rng.lognormal(0, 1, 3000)
    v[::37] = np.nan
    assert_groups_equal(sketch_groups(codes, v), sketch_groups_reference(codes, v))


def test_far_apart_values_take_the_sorted_path_agree_and_cost_memory_by_rows_not_key_span():
    """Thousands of groups each holding -1e300 and 1e300 (a hostile message): dense accumulation
    would allocate 2 * MAX_KEY + 1 cells per group (~1 MB each, GBs in all)."""
    groups = 5000
    codes = np.repeat(np.arange(groups), 3)
    v = np.tile([-1e300, 1e300, np.nan], groups)
    v[5] = 2.5  # one group with an ordinary value besides
    got, ref = sketch_groups(codes, v), sketch_groups_reference(codes, v)
    assert_groups_equal(got, ref)
    assert got.key.size == 2 * groups + 1
    assert got.key[0] == -MAX_KEY and got.key[1] == MAX_KEY
    # merging the same far-apart sketches also sorts, and adds counts and sums exactly
    gid = np.repeat(np.arange(len(got)), np.diff(got.start))
    merged = merge_sets(groups, np.r_[gid, gid], np.r_[got.key, got.key], np.r_[got.bcount, got.bcount],
                        np.r_[got.bsum, got.bsum], np.r_[np.arange(groups), np.arange(groups)],
                        np.r_[got.count, got.count], np.r_[got.lost, got.lost],
                        np.r_[got.vmin, got.vmin], np.r_[got.vmax, got.vmax])
    np.testing.assert_array_equal(merged.key, got.key)
    np.testing.assert_array_equal(merged.bcount, 2 * got.bcount)
    np.testing.assert_array_equal(merged.bsum, 2 * got.bsum)
    assert merged.count.tolist() == (2 * got.count).tolist()
