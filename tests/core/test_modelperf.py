"""core.modelperf: a model's communication share by node count and its speed on a newer card, against
worked examples written out by hand and a plain per-row reference."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from core.modelperf import shares_at, shares_by_nodes, speed_ratio


def test_shares_by_nodes_worked_example():
    # 2 nodes: 0.2, 0.4, 0.6 -> median 0.4; 4 nodes: 0.5, 0.7 -> 0.6; 3 between: 0.5; 5 and 6 beyond: 0.6
    nodes = [2, 2, 2, 4, 4, 1]
    step = [1.0, 2.0, 1.0, 2.0, 1.0, 1.0]
    sync = [0.2, 0.8, 0.6, 1.0, 0.7, 0.9]  # the one-node step does not count
    np.testing.assert_allclose(
        shares_by_nodes(nodes, sync, step, 6), [0, 0, 0.4, 0.5, 0.6, 0.6, 0.6]
    )


def test_shares_by_nodes_below_the_smallest_measured_and_bad_rows():
    # only 4 nodes measured: 2 and 3 take its share; a zero or NaN step is left out
    got = shares_by_nodes([4, 4, 4, 4], [0.3, 5.0, np.nan, 0.5], [1.0, 0.0, 1.0, 1.0], 5)
    np.testing.assert_allclose(got, [0, 0, 0.4, 0.4, 0.4, 0.4])


def test_shares_by_nodes_nothing_measured_and_empty():
    assert np.isnan(shares_by_nodes([1, 1], [0.1, 0.1], [1.0, 1.0], 3)[2:]).all()
    assert np.isnan(shares_by_nodes([], [], [], 3)[2:]).all()
    assert shares_by_nodes([], [], [], 3)[:2].tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(shares_by_nodes([2], [0.1], [1.0], 1), [0.0, 0.0])


def test_shares_by_nodes_against_a_plain_reference():
    rng = np.random.default_rng(4)
    nodes = rng.choice([1, 2, 3, 4, 6, 8], 300)
    step = rng.uniform(0.1, 2.0, 300)
    sync = step * rng.uniform(0, 1, 300)
    got = shares_by_nodes(nodes, sync, step, 10)
    med = {
        n: statistics.median(s / t for m, s, t in zip(nodes, sync, step, strict=True) if m == n)
        for n in (2, 3, 4, 6, 8)
    }
    want = [
        0.0,
        0.0,
        med[2],
        med[3],
        med[4],
        (med[4] + med[6]) / 2,
        med[6],
        (med[6] + med[8]) / 2,
        med[8],
        med[8],
        med[8],
    ]
    np.testing.assert_allclose(got, want)


def test_speed_ratio_worked_example_and_edges():
    assert speed_ratio([10, 30, 16], [10, 20, 8]) == pytest.approx(1.5)
    assert speed_ratio([10, 30, 0], [10, 20, 8]) == pytest.approx(
        1.25
    )  # a zero throughput is not measured
    assert np.isnan(speed_ratio([], []))
    assert np.isnan(speed_ratio([np.nan], [1.0]))
    assert speed_ratio([5, 5], [10, 10]) == 0.5  # a newer card slower for that model stays so


def test_shares_at_reads_each_jobs_model_and_node_count():
    table = np.array([[0, 0, 0.4, 0.5], [0, 0, 0.7, 0.8]])
    got = shares_at(table, [0, 1, 1, 0], [2, 3, 9, 1])
    np.testing.assert_allclose(got, [0.4, 0.8, 0.8, 0.0])  # 9 nodes: the largest count's; 1 node: 0
