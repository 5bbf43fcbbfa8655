"""The regime forecaster (core/forecast.py): worked examples (a level shift an hour before the origin,
a shift three samples before it, a lone spike, a diurnal series, gaps and failed probes), the
kernel against a plain one-series-at-a-time reference, and the error scales."""

import warnings

import numpy as np
import pytest

from core.forecast import (
    DEFAULT_MODEL,
    ForecastModel,
    fit_forecast,
    forecast,
    last_value,
    mae,
    mase,
    naive_scale,
    seasonal_naive,
)

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


def noisy_level(n, level=10.0, seed=0):
    return level + np.random.default_rng(seed).normal(0, 0.1, n)


def test_a_level_shift_an_hour_before_the_origin_is_the_level():
    y = noisy_level(3 * DAY)
    y[-60:] += 30.0  # rerouted an hour ago: 10 -> 40
    f = forecast(y[None], 30, DAY)
    assert f.p50[0] == pytest.approx(np.full(30, 40.0), abs=0.1)
    assert not f.seasonal[0]
    # the straight line and daily profile of the old model stayed near 10; last value is one noisy sample
    assert abs(f.p50[0, 0] - 40.0) <= abs(last_value(y[None], 1)[0, 0] - 40.0) + 0.1


def test_a_shift_shows_after_two_samples_and_a_lone_spike_is_not_one():
    y = np.full(3 * DAY, 10.0)
    y[-2:] = 20.0  # two samples at the new level: a shift
    assert fit_forecast(y[None], 5, DAY)[0] == pytest.approx(np.full(5, 20.0))
    y[-2] = 10.0  # one sample at 20: a spike, the level stays
    assert fit_forecast(y[None], 5, DAY)[0] == pytest.approx(np.full(5, 10.0))
    y[-40::7] = 150.0  # spikes every 7 samples, the last sample among them
    y[-1] = 150.0
    assert fit_forecast(y[None], 5, DAY)[0] == pytest.approx(np.full(5, 10.0))


def test_a_diurnal_series_keeps_its_rhythm_and_a_flat_one_gets_no_profile():
    t = np.arange(int(4.5 * DAY) + 30)  # ends mid-day
    wave = lambda i: 10 + 3 * np.sin(2 * np.pi * i / DAY)  # noqa: E731
    f = forecast(np.stack([wave(t), noisy_level(t.size)]), 120, DAY)
    assert f.seasonal.tolist() == [True, False]
    assert f.p50[0] == pytest.approx(wave(t.size + np.arange(120)), abs=0.05)
    assert f.p50[1] == pytest.approx(np.full(120, 10.0), abs=0.1)


def test_gaps_and_failed_probes_at_the_end_leave_the_last_known_level():
    y = noisy_level(3 * DAY)
    y[-100:-40] = 25.0
    y[-40:] = np.nan  # the probe stopped answering
    assert fit_forecast(y[None], 10, DAY)[0] == pytest.approx(np.full(10, 25.0))
    empty = forecast(np.full((2, 3 * DAY), np.nan), 4, DAY)
    assert np.isnan(empty.p50).all() and np.isnan(empty.upper).all()
    assert forecast(np.zeros((0, 3 * DAY)), 4, DAY).p50.shape == (0, 4)
    short = forecast(np.array([[5.0, np.nan, 5.0]]), 3, DAY)  # less than a day: level only
    assert short.p50.tolist() == [[5.0] * 3] and not short.seasonal[0]


def test_upper_quantile_covers_about_its_share():
    rng = np.random.default_rng(3)
    hist = 20 + rng.gamma(2.0, 1.0, (200, 4 * DAY + 60))  # skewed upwards, like RTT
    f = forecast(hist[:, :-60], 60, DAY, ForecastModel(quantile=0.9))
    assert (f.upper >= f.p50).all()
    assert np.mean(hist[:, -60:] <= f.upper) == pytest.approx(0.9, abs=0.03)


def test_beats_last_value_and_seasonal_naive_on_diurnal_series_with_trend_noise_outliers():
    hist, truth = synthetic()
    ours = mae(fit_forecast(hist, 60, DAY), truth)
    naive = mae(seasonal_naive(hist, 60, DAY), truth)
    last = mae(last_value(hist, 60), truth)
    assert np.nanmean(ours) < 0.5 * np.nanmean(naive) and np.nanmean(ours) < 0.5 * np.nanmean(last)
    assert (ours < last).mean() > 0.8  # most series


def test_seasonal_naive_is_the_day_before_or_nothing():
    h = np.arange(10.0)[None]  # a "day" of 4 steps
    assert seasonal_naive(h, 6, 4).tolist() == [[6.0, 7.0, 8.0, 9.0, 6.0, 7.0]]
    # three steps of a four-step day: the first forecast step has no day before it, the second does
    np.testing.assert_array_equal(seasonal_naive(h[:, :3], 2, 4), [[np.nan, 0.0]])
    assert np.isnan(seasonal_naive(np.zeros((2, 0)), 2, 4)).all() and seasonal_naive(np.zeros((2, 0)), 2, 4).shape == (2, 2)


def test_short_history_forecasts_the_level_and_a_band():
    from core.forecast import min_history

    rng = np.random.default_rng(5)
    need = min_history(60)
    assert need == 90  # the level's window of 30 and one horizon of 60
    y = 40 + rng.normal(0, 0.5, (3, need))
    y[1, -5:] += 10  # a shift in the last five samples
    f = forecast(y, 60, DAY)
    assert not f.seasonal.any()  # no day of its own past: no profile
    np.testing.assert_allclose(f.p50[0], np.median(y[0, -15:]))
    np.testing.assert_allclose(f.p50[1], np.median(y[1, -5:]))  # the new level
    assert (f.upper >= f.p50).all() and (f.upper[0] - f.p50[0] < 3).all()  # a band from its own past errors


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="history must be"):
        forecast(np.zeros(10), 3, DAY)
    with pytest.raises(ValueError, match="horizon >= 1"):
        forecast(np.zeros((1, 10)), 0, DAY)
    with pytest.raises(ValueError, match="base <= window"):
        ForecastModel(base=40, window=30)


def test_baselines_and_scales_worked_example():
    hist = np.array([[1.0, 2.0, 3.0, 4.0, np.nan]])
    assert last_value(hist, 2).tolist() == [[4.0, 4.0]]
    assert seasonal_naive(np.arange(6.0)[None], 3, 3).tolist() == [[3.0, 4.0, 5.0]]
    assert mae(np.array([[1.0, 3.0]]), np.array([[2.0, 1.0]])).tolist() == [1.5]
    # one-step naive scale over known samples: 1, 3, (gap), 2 -> changes 2 and 1 -> 1.5
    h = np.array([[1.0, 3.0, np.nan, 2.0], [7.0, np.nan, np.nan, np.nan]])
    assert naive_scale(h)[0] == 1.5 and np.isnan(naive_scale(h)[1])
    # vectorised against one row at a time, with gaps, an empty row and a lone sample
    rng = np.random.default_rng(0)
    r = rng.random((30, 40))
    r[rng.random(r.shape) < 0.4] = np.nan
    r[3], r[4] = np.nan, np.r_[np.full(7, np.nan), 1.0, np.full(32, np.nan)]
    ref = [np.abs(np.diff(v[~np.isnan(v)])).mean() if (~np.isnan(v)).sum() >= 2 else np.nan for v in r]
    np.testing.assert_allclose(naive_scale(r), ref)
    # forecast 4 against truth 1 and 7: MAE 3, scaled by 1.5 -> 2
    assert mase(np.array([[4.0, 4.0]]), np.array([[1.0, 7.0]]), h[:1]).tolist() == [2.0]


# ---------------------------------------------------------------- the plain reference
def ref_level(y, end, sigma, m: ForecastModel):
    known = [v for v in y[:end] if not np.isnan(v)][-m.window:]
    if not known:
        return np.nan
    x = np.array(known)
    level = np.median(x[-m.base:])
    limit = m.shift_k * sigma
    if abs(x[-1] - level) <= limit:
        return level
    side = np.sign(x[-1] - level)
    run = 0
    for v in x[::-1]:
        if abs(v - level) > limit and np.sign(v - level) == side:
            run += 1
        else:
            break
    return np.median(x[-run:]) if run >= m.run_min else level


def ref_profile(y, end, day):
    days = end // day
    if days < 2:
        return np.zeros(day), False
    grid = y[: days * day].reshape(days, day)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(grid, axis=1)
    x = (np.arange(day) + 0.5) / day - 0.5  # days from the middle of the day
    base = np.empty((days, day))
    for d in range(days):  # linear between neighbouring days' medians (the nearest segment at the ends)
        for j in range(day):
            e = d + 1 if (x[j] >= 0 and d + 1 < days) or d == 0 else d - 1
            ok = 0 <= e < days and not np.isnan(med[e])
            base[d, j] = med[d] + (med[e] - med[d]) * x[j] / (e - d) if ok else med[d]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        prof = np.nan_to_num(np.nanmedian(grid - base, axis=0), nan=0.0)
    w = day // 192
    if w:
        prof = np.array([np.mean(prof[np.arange(j - w, j + w + 1) % day]) for j in range(day)])
    return prof - np.median(prof), True


def reference_forecast(y, horizon, day, m: ForecastModel = DEFAULT_MODEL):
    t = y.size
    known = y[:t][~np.isnan(y[:t])]
    last_day = [v for v in y[max(0, t - day):t] if not np.isnan(v)]
    d = np.abs(np.diff(last_day)) if len(last_day) > 1 else np.zeros(0)
    sigma = max(1.4826 * np.median(d) / np.sqrt(2) if d.size else 0.0, 1e-12)
    start = max(t - int(round(m.select_days * day)), 0)
    start -= start % day
    if start < 2 * day <= t - day:
        start = 2 * day

    def past(z, prof):
        errs = []
        for o in range(start, t - horizon + 1, horizon):
            lv = ref_level(z, o, sigma, m)
            errs += [y[o + k] - (lv + prof[(o + k) % day]) for k in range(horizon)
                     if not np.isnan(y[o + k]) and not np.isnan(lv)]
        return np.array(errs)

    plain = past(y, np.zeros(day))
    prof, ok = ref_profile(y, start, day)
    errs, seasonal = plain, False
    if ok:
        seas = past(y - prof[np.arange(t) % day], prof)
        plain_typical = np.median(np.abs(plain)) if plain.size else np.inf
        if seas.size and np.median(np.abs(seas)) < (1 - m.profile_gain) * plain_typical:
            errs, seasonal = seas, True
            prof, _ = ref_profile(y, t, day)
    if not seasonal:
        prof = np.zeros(day)
    level = ref_level(y - prof[np.arange(t) % day], t, sigma, m)
    f = level + prof[(t + np.arange(horizon)) % day]
    spread = max(np.quantile(errs, m.quantile), 0.0) if errs.size else 0.0
    assert known.size or np.isnan(f).all()
    return f, f + spread, seasonal


@pytest.mark.parametrize("day", [96, 288])  # 15- and 5-minute samples (the latter smooths the profile)
def test_kernel_matches_the_reference_on_shifts_spikes_gaps_rhythm_and_a_partial_day(day):
    rng = np.random.default_rng(4)
    hist, _ = synthetic(series=4, days=4, seed=4)
    rows = [hist[r, :: DAY // day] for r in range(4)]
    level = 30 + rng.normal(0, 0.5, 5 * day - 7)
    level[200:] += 12.0  # a shift
    level[-3:] += 40.0  # and another, three samples old
    level[rng.random(level.size) < 0.03] *= 6  # spikes
    level[300:340] = np.nan  # failed probes
    rows += [level, np.full(3 * day, 7.0), np.r_[np.full(2 * day, np.nan), rng.normal(5, 1, day)]]
    for y in rows:
        f = forecast(y[None], 9, day)
        p50, upper, seasonal = reference_forecast(y, 9, day)
        np.testing.assert_allclose(f.p50[0], p50, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(f.upper[0], upper, rtol=1e-9, atol=1e-9)
        assert f.seasonal[0] == seasonal
