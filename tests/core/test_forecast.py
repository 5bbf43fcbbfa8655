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


def test_a_history_ending_mid_day_continues_the_rhythm():
    t = np.arange(int(3.5 * DAY) + 30)
    wave = lambda i: 10 + 3 * np.sin(2 * np.pi * i / DAY)  # noqa: E731
    f = fit_forecast(wave(t)[None], 120, DAY)
    assert f[0] == pytest.approx(wave(t.size + np.arange(120)), abs=1e-3)


def reference_forecast(y, horizon, day, week_days=7):
    """The same model, one series at a time in plain numpy (the kernel's reference)."""
    import warnings

    t = y.size
    days = -(-t // day)
    yp = np.full(days * day, np.nan)
    yp[:t] = y
    i = np.arange(days * day)
    ok = ~np.isnan(yp)

    def huber_line(v):
        okv = ~np.isnan(v)
        x, z = i[okv].astype(float), v[okv]
        w = np.ones_like(z)
        scale = None
        for _ in range(4):
            b, a = np.polyfit(x, z, 1, w=np.sqrt(w))
            if scale is None:
                scale = 1.4826 * np.median(np.abs(z - (a + b * x))) or 1.0
            u = np.abs(z - (a + b * x)) / (1.345 * scale)
            w = np.where(u <= 1, 1.0, 1.0 / u)
        return a, b

    prof = np.zeros(day)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(2):
            a, b = huber_line(yp - prof[i % day])
            prof = np.nan_to_num(np.nanmedian((yp - (a + b * i)).reshape(days, day), axis=0))
        resid = (yp - (a + b * i) - prof[i % day]).reshape(days, day)
        off = np.array([np.nan_to_num(np.nanmedian(resid[wd::week_days])) if resid[wd::week_days].size else 0.0
                        for wd in range(week_days)])
    assert ok.any()
    f = t + np.arange(horizon)
    return a + b * f + prof[f % day] + off[(f // day) % week_days]


def test_kernel_matches_the_reference_on_gaps_outliers_and_a_partial_day():
    hist, _ = synthetic(series=6, days=3, seed=4)
    hist = hist[:, : 3 * DAY - 200]  # ends mid-day
    got = fit_forecast(hist, 90, DAY)
    for r in range(hist.shape[0]):
        np.testing.assert_allclose(got[r], reference_forecast(hist[r], 90, DAY), rtol=1e-6, atol=1e-6)
