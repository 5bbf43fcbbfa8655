"""Forecasting many network series at once from their own history: the current regime's level, a
daily profile only where the series' own past shows it helps, and an upper quantile.

Real RTT series sit on flat levels that jump (reroutes), with upward spikes and failed probes; a few
carry a daily rhythm. A straight line or a daily profile fitted over all days follows neither. Model
per series (``history`` float[S, T] at a fixed step, oldest first, NaN for gaps, index 0 at UTC
midnight so the daily slots line up with the calendar; ``day`` = samples per day):

1. noise scale ``sigma``: 1.4826 x median |one-step change| / sqrt 2 over the last day (changes of
   consecutive known samples; spikes and shifts barely move a median);
2. level (``regime_level``): the median of the last ``base`` known samples — unless the newest ones
   form a run of at least ``run_min`` samples all on one side of that median by more than
   ``shift_k`` sigma: a level shift, and the level is the median of that run (a lone spike is not a
   run; a shift shows after ``run_min`` samples);
3. daily profile: per slot of the day, the median over days of the sample less its day's level
   (linear between the medians of neighbouring days, so a trend is not taken for a rhythm), smoothed
   over 1/192 of a day either side, centred. Used only when, over origins every ``horizon`` steps in the last ``select_days`` days,
   level + profile (the level taken on the series less its profile, the profile from the days
   before those origins; with less than ``select_days`` + 2 days of history, the origins after its
   first two days) beats the level alone by ``profile_gain`` in median |error| (spikes in the truth
   must not decide); otherwise the series has no rhythm worth the noise it adds;
4. forecast (p50) of step k: level + profile[(T + k) mod day] (profile 0 when not used); ``upper``:
   p50 + the ``quantile`` of the errors the same method made at those origins (all steps pooled, at
   least 0) — preventive rescheduling acts on it, not on the point.
Vectorised over series: one numba kernel, parallel over series, no Python loop over series.

Baselines: last value and seasonal naive (the value one day earlier). Errors: MAE, and MASE scaled
by the in-sample MAE of the one-step naive forecast (the change from one known sample to the next).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from core.quiet import quiet_nan_warnings
from core.vocabulary import MAD_TO_SIGMA


@dataclass(frozen=True)
class ForecastModel:
    base: int = 15  # samples the calm level is the median of
    run_min: int = 2  # newest samples beyond the threshold on one side that make a shift
    shift_k: float = 3.0  # sigmas a shifted sample lies from the level
    window: int = 30  # longest run (and newest samples) the level looks at
    select_days: float = 2.0  # the series' own past the profile must prove itself on
    profile_gain: float = 0.1  # the profile is used when it cuts that past error by this share
    quantile: float = 0.9  # of the past errors, for ``upper``

    def __post_init__(self) -> None:
        if not 1 <= self.base <= self.window or self.run_min < 1 or self.shift_k <= 0:
            raise ValueError("1 <= base <= window, run_min >= 1, shift_k > 0")
        if self.select_days <= 0 or not 0 <= self.profile_gain < 1 or not 0.5 <= self.quantile < 1:
            raise ValueError("select_days > 0, 0 <= profile_gain < 1, 0.5 <= quantile < 1")


DEFAULT_MODEL = ForecastModel()


@dataclass
class Forecast:
    p50: np.ndarray  # float64[S, horizon]
    upper: np.ndarray  # float64[S, horizon] the model's quantile
    seasonal: np.ndarray  # bool[S] the daily profile was used


def forecast(history: np.ndarray, horizon: int, day: int, model: ForecastModel = DEFAULT_MODEL) -> Forecast:
    """The forecast of every series for the next ``horizon`` steps (NaN for a series with no data)."""
    y = np.asarray(history, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError("history must be [series, time]")
    if horizon < 1 or day < 2:
        raise ValueError("horizon >= 1 and day >= 2 samples")
    p50, upper, seasonal = _forecast_rows(np.ascontiguousarray(y), horizon, day, model.base, model.run_min,
                                          model.shift_k, model.window, int(round(model.select_days * day)),
                                          model.profile_gain, model.quantile)
    return Forecast(p50, upper, seasonal)


def min_history(horizon: int, model: ForecastModel = DEFAULT_MODEL) -> int:
    """Steps of span a forecast needs: one horizon of its own past errors (for ``upper``) and the
    level's ``window`` newest samples after it. The daily profile asks for no more: with less than
    two days behind the origins it judges itself on, it is simply not used."""
    return model.window + horizon


def fit_forecast(history: np.ndarray, horizon: int, day: int, model: ForecastModel = DEFAULT_MODEL) -> np.ndarray:
    """float[S, horizon]: the p50 forecast (see :func:`forecast`)."""
    return forecast(history, horizon, day, model).p50


@nb.njit(cache=True)
def _newest(y, end, n, out):
    """The newest ``n`` known samples of ``y`` before index ``end`` into ``out`` (oldest first); how many."""
    m = 0
    i = end - 1
    while i >= 0 and m < n:
        if y[i] == y[i]:
            m += 1
            out[n - m] = y[i]
        i -= 1
    for j in range(m):  # shift them to the front
        out[j] = out[n - m + j]
    return m


@nb.njit(cache=True)
def regime_level(y, end, sigma, base, run_min, shift_k, window, buf):
    """The level of ``y[:end]`` (module docstring, step 2); NaN when nothing is known."""
    m = _newest(y, end, window, buf)
    if m == 0:
        return np.nan
    b = min(base, m)
    level = np.median(buf[m - b:m])
    limit = shift_k * sigma
    last = buf[m - 1] - level
    if abs(last) <= limit:
        return level
    run = 0
    while run < m and abs(buf[m - 1 - run] - level) > limit and (buf[m - 1 - run] - level) * last > 0:
        run += 1
    if run < run_min:
        return level
    return np.median(buf[m - run:m])


@nb.njit(cache=True)
def _sigma(y, end, day, buf):
    """Noise scale from the one-step changes of the last day's known samples (module docstring, step 1)."""
    m = 0
    prev = np.nan
    for i in range(max(0, end - day), end):
        v = y[i]
        if v == v:
            if prev == prev:
                buf[m] = abs(v - prev)
                m += 1
            prev = v
    s = MAD_TO_SIGMA * np.median(buf[:m]) / np.sqrt(2.0) if m else 0.0
    return s if s > 1e-12 else 1e-12


@nb.njit(cache=True)
def _profile(y, end, day, out, buf):
    """Daily profile of ``y[:end]`` (module docstring, step 3) into ``out``; False with under two days."""
    days = end // day
    if days < 2:
        out[:] = 0.0
        return False
    med = np.empty(days)
    for d in range(days):
        m = 0
        for j in range(day):
            v = y[d * day + j]
            if v == v:
                buf[m] = v
                m += 1
        med[d] = np.median(buf[:m]) if m else np.nan
    for j in range(day):
        m = 0
        for d in range(days):
            v = y[d * day + j] - _day_base(med, d, (j + 0.5) / day - 0.5)
            if v == v:
                buf[m] = v
                m += 1
        out[j] = np.median(buf[:m]) if m else 0.0
    w = day // 192  # smoothed over the slots within 1/192 of a day either side (7.5 min at 1-min slots)
    if w > 0:
        raw = out.copy()
        for j in range(day):
            acc = 0.0
            for k in range(-w, w + 1):
                acc += raw[(j + k) % day]
            out[j] = acc / (2 * w + 1)
    out -= np.median(out)
    return True


@nb.njit(cache=True)
def _day_base(med, d, x):
    """The series' level at ``x`` days from the middle of day ``d``: linear between the medians of
    neighbouring days (a trend does not leak into the profile as a ramp), the nearest segment's line
    at the ends, day d's own median when a neighbour has none."""
    days = med.size
    e = d + 1 if (x >= 0 and d + 1 < days) or d == 0 else d - 1
    if e < 0 or e >= days or med[e] != med[e]:
        return med[d]
    return med[d] + (med[e] - med[d]) * x / (e - d)


@nb.njit(cache=True)
def _past_errors(y, z, prof, start, end, horizon, day, sigma, base, run_min, shift_k, window, buf, errs):
    """Signed errors (truth - forecast) at origins ``start``, ``start + horizon``, ... up to ``end``:
    of the level on ``z`` plus ``prof`` (all zero: the plain level); their count."""
    n = 0
    o = start
    while o + horizon <= end:
        lv = regime_level(z, o, sigma, base, run_min, shift_k, window, buf)
        for k in range(horizon):
            v = y[o + k]
            if v == v and lv == lv:
                errs[n] = v - (lv + prof[(o + k) % day])
                n += 1
        o += horizon
    return n


@nb.njit(cache=True)
def _typical_abs(errs, n):
    """Median |error| (spikes in the truth are no one's to forecast: they must not decide)."""
    return np.median(np.abs(errs[:n])) if n else np.inf


@nb.njit(parallel=True, cache=True)
def _forecast_rows(y, horizon, day, base, run_min, shift_k, window, select, gain, q):
    s, t = y.shape
    p50 = np.full((s, horizon), np.nan)
    upper = np.full((s, horizon), np.nan)
    seasonal = np.zeros(s, np.bool_)
    start = max(t - select, 0)
    start -= start % day  # the profile is judged on whole days of its own future
    if start < 2 * day <= t - day:
        start = 2 * day  # a short history: judged on what follows its first two days
    for r in nb.prange(s):
        yr = y[r]
        buf = np.empty(max(t, window, 2))
        errs = np.empty(2 * (t - start) + 2)
        flat = np.zeros(day)
        sigma = _sigma(yr, t, day, buf)
        n_plain = _past_errors(yr, yr, flat, start, t, horizon, day, sigma, base, run_min, shift_k, window, buf, errs)
        plain = _typical_abs(errs, n_plain)
        prof = np.zeros(day)
        use = False
        n_seas = 0
        if _profile(yr, start, day, prof, buf):  # judged with a profile from the days before
            z = yr - prof[np.arange(t) % day]
            n_seas = _past_errors(yr, z, prof, start, t, horizon, day, sigma, base, run_min, shift_k, window, buf,
                                  errs[n_plain:])
            use = n_seas > 0 and _typical_abs(errs[n_plain:], n_seas) < (1.0 - gain) * plain
        if use:
            errs[:n_seas] = errs[n_plain:n_plain + n_seas].copy()
            n = n_seas
            _profile(yr, t, day, prof, buf)  # the forecast uses every day
        else:
            prof[:] = 0.0
            n = n_plain
        z = yr - prof[np.arange(t) % day]
        level = regime_level(z, t, sigma, base, run_min, shift_k, window, buf)
        spread = max(np.quantile(errs[:n], q), 0.0) if n else 0.0
        for k in range(horizon):
            p50[r, k] = level + prof[(t + k) % day]
            upper[r, k] = p50[r, k] + spread
        seasonal[r] = use
    return p50, upper, seasonal


def last_value(history: np.ndarray, horizon: int) -> np.ndarray:
    y = np.asarray(history, dtype=np.float64)
    # the last non-NaN value of each row
    ok = ~np.isnan(y)
    last_idx = np.where(ok.any(1), y.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    return np.repeat(y[np.arange(y.shape[0]), last_idx][:, None], horizon, axis=1)


def seasonal_naive(history: np.ndarray, horizon: int, day: int) -> np.ndarray:
    """The value one day earlier (for horizons beyond a day, repeated); NaN where the history holds
    no such day."""
    y = np.asarray(history, dtype=np.float64)
    t = y.shape[1]
    src = t - day + (np.arange(horizon) % day)
    if not t:
        return np.full((y.shape[0], horizon), np.nan)
    return np.where(src >= 0, y[:, np.maximum(src, 0)], np.nan)


def mae(forecast: np.ndarray, actual: np.ndarray) -> np.ndarray:
    with quiet_nan_warnings():
        return np.nanmean(np.abs(forecast - actual), axis=1)


def naive_scale(history: np.ndarray) -> np.ndarray:
    """float[S]: the in-sample MAE of the one-step naive forecast — the mean |change| between
    consecutive known samples of each series (NaN with fewer than two)."""
    h = np.asarray(history, dtype=np.float64)
    ok = ~np.isnan(h)
    prev = np.where(ok, np.arange(h.shape[1]), -1)
    np.maximum.accumulate(prev, axis=1, out=prev)  # the newest known index at or before each step
    before = np.c_[np.full((h.shape[0], 1), -1), prev[:, :-1]]  # ... strictly before it
    step = ok & (before >= 0)
    change = np.abs(h - np.take_along_axis(h, np.maximum(before, 0), axis=1))
    n = step.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.where(step, change, 0.0).sum(axis=1) / n, np.nan)


def mase(forecast: np.ndarray, actual: np.ndarray, history: np.ndarray) -> np.ndarray:
    """MAE scaled by the in-sample one-step naive MAE (:func:`naive_scale`); NaN where that is 0."""
    scale = naive_scale(history)
    return mae(forecast, actual) / np.where(scale > 0, scale, np.nan)
