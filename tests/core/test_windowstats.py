import math

import numpy as np

from core.windowstats import hampel_mask, window_stats_reference


def test_worked_example_with_one_spike_and_one_lost_probe():
    # values 1, 2, 3, 100 and a lost probe. median = 2.5, |x - 2.5| = 1.5, 0.5, 0.5, 97.5,
    # MAD = 1.0, threshold 3 * 1.4826 * 1.0 = 4.4478: 100 is an outlier, 1, 2, 3 are kept.
    s = window_stats_reference(np.array([1.0, 2.0, 3.0, np.nan, 100.0]))
    assert (s["count"], s["lost"], s["outliers"], s["kept"]) == (5, 1, 1, 3)
    assert s["mean"] == 2.0 and s["p50"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0
    assert math.isclose(s["p95"], 2.9) and math.isclose(s["p99"], 2.98)


def test_constant_input_keeps_everything():
    s = window_stats_reference(np.full(10, 0.25))
    assert s["kept"] == 10 and s["outliers"] == 0 and s["p99"] == 0.25


def test_mad_zero_drops_nothing_so_loss_bursts_survive():
    x = np.array([0.0] * 9 + [0.3])
    assert hampel_mask(x).all()
    assert window_stats_reference(x)["max"] == 0.3


def test_empty_and_all_lost():
    for values in (np.array([]), np.array([np.nan, np.nan])):
        s = window_stats_reference(values)
        assert s["kept"] == 0 and math.isnan(s["mean"]) and math.isnan(s["p95"])
        assert s["lost"] == int(np.isnan(values).sum())
