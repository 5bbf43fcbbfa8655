"""A workload's speed on each card model from its runners' rates (core.speeds): worked examples and a
plain reference."""

import numpy as np
import pytest

from core.speeds import workload_speeds


def test_worked_example_the_newer_card_slower_for_this_workload():
    # metered 1.0 (A100s) and 1.5 (H100s) and 2.0 (an unmeasured model); the workload ran at 48.9 steps/s
    # on an A100 and 23.3 on an H100 (Gavel's recommendation model, P100 against V100): the anchor is the
    # A100 (the slowest metered of the measured), the H100 runs at 1.0 x 23.3 / 48.9 = 0.4765
    got = workload_speeds([1.0, 1.5, 1.5, 2.0], [0, 1, 1, 2], [48.9, 23.3, np.nan])
    np.testing.assert_allclose(got, [1.0, 23.3 / 48.9, 23.3 / 48.9, 2.0])


def test_the_anchor_is_the_slowest_measured_model_not_the_first_code():
    # model 0 metered 1.5, model 1 metered 1.0: model 1 anchors at 1.0; model 0 = 1.0 x 30 / 20 = 1.5 x 1.0
    got = workload_speeds([1.5, 1.0, 3.0], [0, 1, -1], [30.0, 20.0])
    np.testing.assert_allclose(got, [1.5, 1.0, 3.0])  # the node of unknown model (-1) keeps its metered 3.0
    got = workload_speeds([1.5, 1.0], [0, 1], [60.0, 20.0])
    np.testing.assert_allclose(got, [3.0, 1.0])


@pytest.mark.parametrize("rate", [[48.9, np.nan], [48.9, 0.0], [np.nan, np.nan], [48.9, -1.0], []])
def test_fewer_than_two_measured_models_change_nothing(rate):
    metered = np.array([1.0, 1.5, 1.5])
    got = workload_speeds(metered, [0, 1, 1], rate)
    np.testing.assert_array_equal(got, metered)
    assert got is not metered  # a copy: the caller's array is never written


def test_empty_and_constant_inputs():
    assert workload_speeds([], [], [1.0, 2.0]).size == 0
    np.testing.assert_array_equal(workload_speeds([1.0, 1.0], [0, 1], [5.0, 5.0]), [1.0, 1.0])


def test_against_a_plain_reference_on_random_inputs():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, m = int(rng.integers(1, 12)), int(rng.integers(1, 5))
        model = rng.integers(-1, m, n)
        per_model = rng.choice([1.0, 1.5, 2.0, 3.0], m)
        metered = np.where(model >= 0, per_model[np.maximum(model, 0)], rng.uniform(0.5, 3, n))
        rate = np.where(rng.random(m) < 0.3, np.nan, rng.uniform(1, 100, m))
        got = workload_speeds(metered, model, rate)
        # the plain rule, node by node
        present = sorted({int(x) for x in model if x >= 0 and np.isfinite(rate[x])})
        want = metered.copy()
        if len(present) >= 2:
            anchor = min(present, key=lambda k: (per_model[k], list(model).index(k)))
            for i in range(n):
                if model[i] >= 0 and np.isfinite(rate[model[i]]):
                    want[i] = per_model[anchor] * rate[model[i]] / rate[anchor]
        np.testing.assert_allclose(got, want, rtol=1e-12)
