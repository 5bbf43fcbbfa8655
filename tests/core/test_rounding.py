"""core.rounding: Python's round(x, places) of many values at once, compiled, against Python's round of
each — near halves (where the product's rounding error could cross one), negative zero, NaN, infinities,
huge and tiny values."""

import math

import numpy as np
import pytest

from core.rounding import round_places, round_places_reference


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit: equal values (NaN with NaN) and equal signs (-0.0 is not 0.0)."""
    return np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("places", [0, 3, 4, 6])
def test_the_same_as_python_s_round_of_each(places):
    rng = np.random.default_rng(places)
    halves = (rng.integers(-10**6, 10**6, 3000) + 0.5) / 10.0 ** places  # near k + 0.5 once scaled
    near = np.concatenate([np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), halves])
    values = np.concatenate([
        near, rng.uniform(-100, 100, 3000), rng.uniform(0, 1, 3000) * 10.0 ** rng.integers(-12, 14, 3000),
        [0.0, -0.0, -1e-9, 1e-9, math.nan, math.inf, -math.inf, 1e300, -1e300, 5e-324, 2.0 ** 60, 0.03125,
         0.00125, 2.675, 1.0005, 0.5, 1.5, 2.5]])
    got, want = round_places(values, places), round_places_reference(values, places)
    assert same(got, want)


def test_worked_values_and_shapes():
    # 2.675 is 2.67499999999999982236431605997495353221893310546875 in binary: Python says 2.67 at 2
    # places, 2.675 at 3; 0.03125 is exactly 312.5 ten-thousandths: half to even, 0.0312
    assert round_places(np.array([2.675]), 2).tolist() == [2.67]
    assert round_places(np.array([[0.03125, 1 / 3], [-0.00001, 7.0]])).tolist() == [[0.0312, 0.3333], [-0.0, 7.0]]
    assert math.copysign(1, round_places(np.array([-0.00001]))[0]) == -1.0
    assert round_places(np.zeros(0)).shape == (0,)
    assert round_places(np.float32([0.1]))[0] == round(float(np.float32(0.1)), 4)  # the float32's own value
