import numpy as np
import pytest

from core.forecast import fit_forecast, last_value, mae, mase, seasonal_naive

DAY = 1440  # 1-minute samples


def synthetic(series=60, days=7, horizon=60, seed=0):
    """Diurnal RTT-like series with trend, noise, outliers and gaps; and the next ``horizon`` truth."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY + horizon)
    base = rng.uniform(1, 100, (series, 1))
    amp = base * rng.uniform(0.1, 0.5, (series, 1))
    phase = rng.uniform(0, 2 * np.pi, (series, 1))
    trend = base * rng.uniform(-0.02, 0.05, (series, 1)) * t / DAY  # up to 5 % of the level per day
    clean = base + trend + amp * np.sin(2 * np.pi * t / DAY + phase)
    noisy = clean + rng.normal(0, 1, clean.shape) * base * 0.03
    hist = noisy[:, : days * DAY].copy()
    spikes = rng.random(hist.shape) < 0.01
    hist[spikes] *= rng.uniform(5, 20, spikes.sum())  # outliers
    hist[rng.random(hist.shape) < 0.02] = np.nan  # gaps
    return hist, clean[:, days * DAY:]


def test_beats_seasonal_naive_and_last_value_on_diurnal_series_with_trend_noise_outliers():
    hist, truth = synthetic()
    ours = mae(fit_forecast(hist, 60, DAY), truth)
    naive = mae(seasonal_naive(hist, 60, DAY), truth)
    last = mae(last_value(hist, 60), truth)
    assert np.nanmean(ours) < 0.5 * np.nanmean(naive)
    assert np.nanmean(ours) < np.nanmean(last)
    assert (ours < naive).mean() > 0.9  # nearly every series
    assert np.nanmean(mase(fit_forecast(hist, 60, DAY), truth, hist, DAY)) < 1.0


def test_constant_and_linear_series_are_forecast_exactly():
    t = np.arange(3 * DAY)
    hist = np.stack([np.full(t.size, 5.0), 2.0 + 0.01 * t])
    f = fit_forecast(hist, 10, DAY)
    assert f[0] == pytest.approx(np.full(10, 5.0))
    assert f[1] == pytest.approx(2.0 + 0.01 * (3 * DAY + np.arange(10)), rel=1e-6)


def test_too_little_history_is_an_error_naming_what_is_needed():
    with pytest.raises(ValueError, match="need at least two days of history \\(2880 samples\\), got 100"):
        fit_forecast(np.zeros((1, 100)), 10, DAY)


def test_baselines_worked_example():
    hist = np.array([[1.0, 2.0, 3.0, 4.0, np.nan]])
    assert last_value(hist, 2).tolist() == [[4.0, 4.0]]
    assert seasonal_naive(np.arange(6.0)[None], 3, 3).tolist() == [[3.0, 4.0, 5.0]]
    assert mae(np.array([[1.0, 3.0]]), np.array([[2.0, 1.0]])).tolist() == [1.5]


def test_parallel_nanmedian_matches_numpy_on_nan_empty_and_constant_rows():
    import warnings

    from core.forecast import nanmedian_rows

    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (50, 37))
    x[rng.random(x.shape) < 0.2] = np.nan
    x[3] = np.nan  # a row with nothing
    x[4] = 2.5  # constant
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanmedian(x, axis=1)
    np.testing.assert_array_equal(nanmedian_rows(x), expected)
    assert nanmedian_rows(np.zeros((0, 5))).shape == (0,)


def test_a_history_ending_mid_day_continues_the_rhythm():
    t = np.arange(int(3.5 * DAY) + 30)
    wave = lambda i: 10 + 3 * np.sin(2 * np.pi * i / DAY)  # noqa: E731
    f = fit_forecast(wave(t)[None], 120, DAY)
    assert f[0] == pytest.approx(wave(t.size + np.arange(120)), abs=1e-3)
