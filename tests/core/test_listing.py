"""core.listing: what a decision lists of a task's nodes in one compiled pass, against the functions it
fuses (top, top_where, listed_reasons, round_places) one after another — ties, NaN, infinities, empty
and constant inputs, values near a rounding half, float32 beside float64 — and a worked example."""

import math

import numpy as np
import pytest

from core.listing import MAX_PARTS, listing, listing_reference
from core.placement import _SMALL_K
from core.scoring import FEASIBLE, NO_CARDS, REASONS, UNAVAILABLE


def same(a, b) -> bool:
    """Bit for bit, as lists of arrays: values (NaN with NaN), signs and dtypes' kinds."""
    return all(np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x), np.signbit(y))
               for x, y in zip(a, b, strict=True))


def fields(got) -> list:
    return [got.top, got.table, got.compute_only, got.counts, got.rejected]


def case(rng, n: int) -> tuple:
    kind = int(rng.integers(0, 4))
    if kind == 0:  # few distinct values: ties everywhere
        composite = rng.integers(0, 4, n).astype(np.float32) * 25
    elif kind == 1:  # constant
        composite = np.full(n, 50.0, np.float32)
    else:
        composite = rng.uniform(0, 100, n).astype(np.float32 if kind == 2 else np.float64)
    reasons = rng.choice([FEASIBLE, FEASIBLE, NO_CARDS, UNAVAILABLE, len(REASONS) - 1], n).astype(np.int8)
    composite[reasons != FEASIBLE] = -np.inf
    composite[rng.random(n) < 0.05] = np.nan
    halves = (rng.integers(0, 10**6, n) + 0.5) / 1e4  # near a half once scaled by 10**4
    parts = [rng.uniform(0, 100, n).astype(np.float32), composite, np.nextafter(halves, np.inf),
             rng.uniform(0, 1, n)][:int(rng.integers(0, MAX_PARTS + 1))]
    for p in parts:
        if p.dtype == np.float64 and p is not composite:
            p[rng.random(n) < 0.05] = rng.choice([np.nan, np.inf, -np.inf, 2.675, -0.00001])
    co = rng.integers(0, 5, n).astype(np.float32) if rng.random() < 0.5 else rng.uniform(0, 100, n)
    co[rng.random(n) < 0.05] = np.nan
    return composite, parts, reasons, co


@pytest.mark.parametrize("seed", range(6))
def test_the_same_as_the_functions_it_fuses(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 9, 10, 11, 37, 300):
        for _ in range(12):
            composite, parts, reasons, co = case(rng, n)
            k = int(rng.choice([1, 3, 10, _SMALL_K]))
            g = int(rng.choice([1, 2, 4, 9, _SMALL_K, _SMALL_K + 3]))
            listed = int(rng.choice([0, 1, 2, 20]))
            for co_scores in (co, None):
                got = listing(composite, parts, k, reasons, listed, co_scores, g)
                want = listing_reference(composite, parts, k, reasons, listed, co_scores, g)
                assert same(fields(got), fields(want)), (n, k, g, listed)


def test_a_worked_listing():
    nan, inf = math.nan, math.inf
    composite = np.array([70.0, 90.0, -inf, 90.0, nan, 80.0, 10.0])
    reasons = np.array([FEASIBLE, FEASIBLE, NO_CARDS, FEASIBLE, FEASIBLE, FEASIBLE, UNAVAILABLE], np.int8)
    compute = np.array([1.23456, 2.0, 3.0, 4.00005, 5.0, 6.0, 7.0])
    co = np.array([5.0, 9.0, 9.9, 1.0, 8.0, 9.0, 9.9])
    got = listing(composite, [compute, composite], 3, reasons, 1, co, 2)
    assert got.top.tolist() == [1, 3, 5]  # 90 twice: the lower index first; NaN and -inf never listed
    # 4.00005 is 4.000049999... in binary: Python rounds it down
    assert got.table.tolist() == [[2.0, 4.0, 6.0], [90.0, 90.0, 80.0]]
    assert got.compute_only.tolist() == [1, 5]  # 9.0 twice among the feasible; 9.9 are rejected
    assert got.counts[[FEASIBLE, NO_CARDS, UNAVAILABLE]].tolist() == [5, 1, 1] and got.counts.sum() == 7
    assert got.rejected.tolist() == [2, 6]
    assert listing(composite, [], 3, reasons, 1).table.shape == (0, 3)
    assert listing(composite, [], 3, reasons, 1).compute_only.size == 0  # not asked


def test_what_it_refuses():
    with pytest.raises(ValueError, match="parts"):
        listing(np.zeros(3), [np.zeros(3)] * (MAX_PARTS + 1), 3, np.zeros(3, np.int8), 1)
    with pytest.raises(ValueError, match="k="):
        listing(np.zeros(3), [], _SMALL_K + 1, np.zeros(3, np.int8), 1)
