"""Capacity planning formulas on worked numbers, beside plain references."""

import math

import numpy as np
import pytest

from core.capacity import cards_for_wait, erlang_c, wait_exceeds, weekly_forecast


def erlang_c_reference(c, a):
    top = a ** c / math.factorial(c) * c / (c - a)
    return top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)


def test_erlang_c_worked_numbers():
    # c = 2, a = 1: (1/2 x 2/1) / (1 + 1 + 1) = 1/3;  c = 3, a = 1: (1/6 x 3/2) / (1 + 1 + 1/2 + 1/4) = 1/11
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(3, 1.0) == pytest.approx(1 / 11)
    assert erlang_c(1, 1.0) == 1.0 and erlang_c(2, 2.5) == 1.0  # overloaded: everyone waits
    for c, a in [(5, 3.2), (12, 10.0), (40, 31.5)]:
        assert erlang_c(c, a) == pytest.approx(erlang_c_reference(c, a))


def test_cards_for_a_p95_wait_worked_numbers():
    # one job an hour, one hour each (a = 1): with 2 servers P(W > t) = 1/3 e^-t, under 5 % from
    # t = ln(20/3) = 1.90 h; with 3 servers 1/11 e^-2t, 1.2 % at t = 1 h
    assert wait_exceeds(2, 1.0, 1.0, 2.0) == pytest.approx(math.exp(-2) / 3)
    assert cards_for_wait(1.0, 1.0, 8, target_h=2.0) == 16  # 2 jobs of 8 cards
    assert cards_for_wait(1.0, 1.0, 8, target_h=1.0) == 24  # 3 jobs: 2 would wait beyond 1 h 12 % of the time
    assert wait_exceeds(2, 1.0, 1.0, 1.0) > 0.05 >= wait_exceeds(3, 1.0, 1.0, 1.0)
    assert cards_for_wait(0.0, 1.0, 8, 1.0) == 0


def test_weekly_forecast_worked_numbers():
    # a straight line 10, 12, 14, 16: next 18, 20, with no spread
    mean, lo, hi = weekly_forecast(np.array([10.0, 12, 14, 16]), 2)
    np.testing.assert_allclose(mean, [18, 20])
    np.testing.assert_allclose(lo, mean) and np.testing.assert_allclose(hi, mean)
    # 10, 14, 12, 16: slope 1.6, intercept 10.6 -> week 4: 17.0; residuals -0.6, 1.8, -1.8, 0.6:
    # s = sqrt(7.2 / 2) = 1.897; half = 2.920 x 1.897 x sqrt(1 + 1/4 + 2.5^2 / 5) = 8.77 at 90 %
    mean, lo, hi = weekly_forecast(np.array([10.0, 14, 12, 16]), 1, level=0.9)
    assert mean[0] == pytest.approx(17.0)
    assert hi[0] - mean[0] == pytest.approx(2.920 * math.sqrt(3.6) * math.sqrt(1 + 0.25 + 6.25 / 5), rel=1e-6)
    assert lo[0] == pytest.approx(17.0 - (hi[0] - 17.0))
    # demand cannot go negative; a gap is left out; one week: that week, no interval
    mean, lo, _ = weekly_forecast(np.array([30.0, 20, 10, 0]), 2)
    assert (mean >= 0).all() and (lo >= 0).all() and mean[0] == 0
    mean, _, _ = weekly_forecast(np.array([10.0, np.nan, 14, 16]), 1)
    assert mean[0] == pytest.approx(np.polyval(np.polyfit([0, 2, 3], [10, 14, 16], 1), 4))
    mean, lo, hi = weekly_forecast(np.array([7.0]), 2)
    assert list(mean) == [7.0, 7.0] and np.isnan(lo).all() and np.isnan(hi).all()
    assert np.isnan(weekly_forecast(np.array([]), 1)[0]).all()
