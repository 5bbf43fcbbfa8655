"""Forecasting many series at once from their own history: trend + daily rhythm + weekday offsets.

Input: ``history`` float[S, T] at a fixed step, oldest first, NaN for gaps; ``day`` = samples per day.
Model per series, robust to outliers and gaps:
1. trend: a straight line fitted by iteratively reweighted least squares with Huber weights
   (outliers barely pull it), first to the raw history, then to history minus the daily profile;
2. daily profile: per slot of the day, the median over the days of history minus the trend
   (steps 1 and 2 alternate twice);
3. weekday offsets: per day of the week, the median of what is left (0 where a weekday has no data).
Forecast of step k after the history: level + slope (T + k) + profile[(T + k) mod day] + offset.
Vectorised over series: numpy reductions over a [S, days, day] view, no loop over series.

Baselines for backtests: last value, and seasonal naive (the value one day earlier).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from core.quiet import quiet_nan_warnings
from core.vocabulary import MAD_TO_SIGMA


def fit_forecast(history: np.ndarray, horizon: int, day: int, week_days: int = 7) -> np.ndarray:
    """float[S, horizon]: the forecast of every series for the next ``horizon`` steps."""
    y = np.asarray(history, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError("history must be [series, time]")
    s, t = y.shape
    if t < 2 * day:
        raise ValueError(f"need at least two days of history ({2 * day} samples), got {t}")
    # index 0 of the history is slot 0 of day 0 (give histories that start at midnight for calendar
    # days); a last partial day is padded with gaps so every day lines up
    days = -(-t // day)
    padded = np.full((s, days * day), np.nan)
    padded[:, :t] = y
    a, b, prof, offsets = _fit_rows(padded.reshape(s, days, day), week_days)
    future = t + np.arange(horizon)
    return (a[:, None] + b[:, None] * future + prof[:, future % day]
            + offsets[:, (future // day) % week_days])


@nb.njit(parallel=True, cache=True)
def _fit_rows(y3, week_days):
    """Per series (in parallel): line and daily profile alternated twice, then weekday offsets."""
    s, days, day = y3.shape
    t = days * day
    a_out = np.zeros(s)
    b_out = np.zeros(s)
    prof_out = np.zeros((s, day))
    off_out = np.zeros((s, week_days))
    for r in nb.prange(s):
        yr = y3[r].ravel()
        prof = np.zeros(day)
        work = np.empty(t)
        buf = np.empty(max(days, t))
        a = 0.0
        b = 0.0
        for _ in range(2):
            for i in range(t):
                work[i] = yr[i] - prof[i % day]
            a, b = _huber_line(work, buf)
            for j in range(day):  # the profile: median over days of what the line leaves
                m = 0
                for d in range(days):
                    v = yr[d * day + j]
                    if v == v:
                        buf[m] = v - (a + b * (d * day + j))
                        m += 1
                prof[j] = np.median(buf[:m]) if m else 0.0
        for wd in range(week_days):  # weekday offsets: median of what is left on that weekday
            m = 0
            for d in range(wd, days, week_days):
                for j in range(day):
                    i = d * day + j
                    v = yr[i]
                    if v == v:
                        buf[m] = v - (a + b * i) - prof[j]
                        m += 1
            off_out[r, wd] = np.median(buf[:m]) if m else 0.0
        a_out[r] = a
        b_out[r] = b
        prof_out[r] = prof
    return a_out, b_out, prof_out, off_out


@nb.njit(cache=True)
def _huber_line(y, buf, iterations=4, c=1.345):
    """Intercept and slope of y ~ a + b i by Huber IRLS (scale from the least-squares fit), NaN ignored."""
    t = y.shape[0]
    a = 0.0
    b = 0.0
    scale = -1.0
    for _ in range(iterations):
        sw = sx = sy = sxx = sxy = 0.0
        for i in range(t):
            v = y[i]
            if v == v:
                if scale > 0:
                    u = abs(v - (a + b * i)) / (c * scale)
                    wi = 1.0 if u <= 1.0 else 1.0 / u
                else:
                    wi = 1.0
                sw += wi
                sx += wi * i
                sy += wi * v
                sxx += wi * i * i
                sxy += wi * i * v
        det = sw * sxx - sx * sx
        b = (sw * sxy - sx * sy) / det if det > 1e-12 else 0.0
        a = (sy - b * sx) / sw if sw > 0 else 0.0
        if scale < 0:
            m = 0
            for i in range(t):
                v = y[i]
                if v == v:
                    buf[m] = abs(v - (a + b * i))
                    m += 1
            scale = MAD_TO_SIGMA * np.median(buf[:m]) if m else 1.0
            if not scale > 0:
                scale = 1.0
    return a, b


def last_value(history: np.ndarray, horizon: int) -> np.ndarray:
    y = np.asarray(history, dtype=np.float64)
    # the last non-NaN value of each row
    ok = ~np.isnan(y)
    last_idx = np.where(ok.any(1), y.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    return np.repeat(y[np.arange(y.shape[0]), last_idx][:, None], horizon, axis=1)


def seasonal_naive(history: np.ndarray, horizon: int, day: int) -> np.ndarray:
    """The value one day earlier (for horizons beyond a day, repeated)."""
    y = np.asarray(history, dtype=np.float64)
    t = y.shape[1]
    src = t - day + (np.arange(horizon) % day)
    return y[:, src]


def mae(forecast: np.ndarray, actual: np.ndarray) -> np.ndarray:
    with quiet_nan_warnings():
        return np.nanmean(np.abs(forecast - actual), axis=1)


def mase(forecast: np.ndarray, actual: np.ndarray, history: np.ndarray, day: int) -> np.ndarray:
    """MAE scaled by the in-sample MAE of the seasonal-naive forecast (lag one day)."""
    h = np.asarray(history, dtype=np.float64)
    with quiet_nan_warnings():
        scale = np.nanmean(np.abs(h[:, day:] - h[:, :-day]), axis=1)
    return mae(forecast, actual) / np.where(scale > 0, scale, np.nan)
