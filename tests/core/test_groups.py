"""core.groups.group_firsts (compiled) against its plain reference (a sort of every row), on random
groups and keys full of ties, empty and constant inputs, and one worked example."""

import numpy as np
import pytest

from core.groups import distinct_per_row, gang_firsts, group_firsts, group_firsts_reference


def test_worked_example():
    # rows 0-5 in groups [0, 0, 1, 1, 1, 0]; one key [3, 1, 2, 2, 0, 1]; g = 2:
    # group 0 holds rows 0, 1, 5 -> least keys 1 (row 1), 1 (row 5; the tie to the lower row first);
    # group 1 holds rows 2, 3, 4 -> row 4 (0), then row 2 (2; row 3 ties and comes later)
    got = group_firsts(np.arange(6), np.array([0, 0, 1, 1, 1, 0]), np.array([[3.0, 1, 2, 2, 0, 1]]), 2)
    np.testing.assert_array_equal(got, [[1, 5], [4, 2]])
    # a group short of g members has no set; rows outside ``rows`` do not count
    got = group_firsts(np.array([0, 2, 3]), np.array([0, 0, 1, 1, 1, 0]), np.array([[3.0, 1, 2, 2, 0, 1]]), 2)
    np.testing.assert_array_equal(got, [[2, 3]])


@pytest.mark.parametrize("seed", range(40))
def test_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    group = rng.integers(0, int(rng.integers(1, 8)), n)
    keys = rng.integers(0, 3, (int(rng.integers(1, 5)), n)).astype(np.float64)  # few values: many ties
    if seed % 5 == 0:
        keys[:] = 1.0  # constant keys: the lowest rows of each group
    rows = np.flatnonzero(rng.random(n) < 0.7)
    for g in (1, 2, 3, 5):
        want = group_firsts_reference(rows, group, keys, g)
        got = group_firsts(rows, group, keys, g)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_empty_and_too_few():
    assert group_firsts(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((1, 0)), 2).shape == (0, 2)
    assert group_firsts(np.array([0]), np.array([0]), np.array([[1.0]]), 2).shape == (0, 2)
    np.testing.assert_array_equal(group_firsts(np.array([0]), np.array([0]), np.array([[1.0]]), 1), [[0]])


@pytest.mark.parametrize("seed", range(5))
def test_distinct_per_row_is_the_sorted_count(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        k, g = int(rng.integers(0, 30)), int(rng.integers(1, 7))
        codes = rng.integers(0, int(rng.integers(1, 6)), (k, g))
        want = 1 + (np.diff(np.sort(codes, axis=1), axis=1) != 0).sum(axis=1)
        got = distinct_per_row(codes)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
    # worked: racks [3, 3, 3], [1, 2, 1, 2], [5, 0, 7]
    assert distinct_per_row(np.array([[3, 3, 3, 3], [1, 2, 1, 2], [5, 0, 7, 5]])).tolist() == [1, 2, 3]


def test_gang_firsts_against_group_firsts_of_its_keys():
    """A gang's blocks in one call: the fitting rows, each rack's and site's count of them, and
    group_firsts' reference of each level's keys (the pool's only with two sites or more)."""
    rng = np.random.default_rng(5)
    for trial in range(400):
        n, g = int(rng.integers(0, 60)), int(rng.integers(1, 6))
        rack = rng.integers(0, 7, n)
        site = rack // 3 if trial % 3 else np.zeros(n, np.int64)
        fits = rng.random(n) < rng.choice([0.0, 0.5, 0.9])
        speed, left = rng.choice([1.0, 2.0, 2.5], n), rng.choice([0.0, 4.0, 7.0], n)
        pool = bool(trial % 2)
        ok, r_count, s_count, by_site, by_rack, first = gang_firsts(fits, g, rack, site, speed, left, pool)
        want_ok = np.flatnonzero(fits)
        assert ok.tolist() == want_ok.tolist()
        assert r_count.tolist() == np.bincount(rack[want_ok], minlength=rack.max(initial=-1) + 1).tolist()
        assert s_count.tolist() == np.bincount(site[want_ok], minlength=site.max(initial=-1) + 1).tolist()
        if want_ok.size < g:
            assert by_site.shape == by_rack.shape == first.shape == (0, g), trial
            continue
        r_stock, s_stock = r_count[rack], s_count[site]
        want = [group_firsts_reference(want_ok, site, np.stack([-r_stock, -speed, left]).astype(float), g),
                group_firsts_reference(want_ok, rack, np.stack([-speed, left]), g)]
        want.append(group_firsts_reference(want_ok, np.zeros(n, np.int64),
                                           np.stack([-s_stock, -r_stock, -speed, left]).astype(float), g)
                    if pool and np.unique(site[want_ok]).size >= 2 else np.zeros((0, g), np.int64))
        assert [b.tolist() for b in (by_site, by_rack, first)] == [b.tolist() for b in want], trial
