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


@nb.njit(parallel=True, cache=True)
def _nanmedian_last(x):
    """Median over the last axis of a 2-D array, NaN ignored (NaN when a row has none)."""
    rows, n = x.shape
    out = np.empty(rows)
    for r in nb.prange(rows):
        buf = np.empty(n)
        m = 0
        for i in range(n):
            v = x[r, i]
            if v == v:
                buf[m] = v
                m += 1
        out[r] = np.median(buf[:m]) if m else np.nan
    return out


def nanmedian_rows(x: np.ndarray) -> np.ndarray:
    """np.nanmedian(x, axis=-1) for 2-D x, in parallel (numba); checked against numpy in the tests."""
    return _nanmedian_last(np.ascontiguousarray(x, dtype=np.float64))


@nb.njit(parallel=True, cache=True)
def _median_over_days(y3):
    """[S, days, day] -> [S, day]: per slot of the day, the median over the days (NaN ignored)."""
    s, days, day = y3.shape
    out = np.empty((s, day))
    for k in nb.prange(s * day):
        r = k // day
        j = k % day
        buf = np.empty(days)
        m = 0
        for d in range(days):
            v = y3[r, d, j]
            if v == v:
                buf[m] = v
                m += 1
        out[r, j] = np.median(buf[:m]) if m else 0.0
    return out


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


def _robust_line(y: np.ndarray, iterations: int = 4, c: float = 1.345) -> tuple[np.ndarray, np.ndarray]:
    """Per-row intercept and slope of y ~ a + b t (t = 0..T-1), Huber IRLS, NaN ignored."""
    return _robust_line_kernel(np.ascontiguousarray(y, dtype=np.float64), iterations, c)


@nb.njit(parallel=True, cache=True)
def _robust_line_kernel(y, iterations, c):
    rows, t = y.shape
    a_out = np.zeros(rows)
    b_out = np.zeros(rows)
    for r in nb.prange(rows):
        w = np.empty(t)
        res = np.empty(t)
        for i in range(t):
            w[i] = 1.0 if y[r, i] == y[r, i] else 0.0
        a = 0.0
        b = 0.0
        scale = -1.0
        for _ in range(iterations):
            sw = sx = sy = sxx = sxy = 0.0
            for i in range(t):
                wi = w[i]
                if wi > 0:
                    v = y[r, i]
                    sw += wi
                    sx += wi * i
                    sy += wi * v
                    sxx += wi * i * i
                    sxy += wi * i * v
            det = sw * sxx - sx * sx
            b = (sw * sxy - sx * sy) / det if det > 1e-12 else 0.0
            a = (sy - b * sx) / sw if sw > 0 else 0.0
            if scale < 0:  # the robust scale of the first (least squares) fit's residuals
                m = 0
                for i in range(t):
                    v = y[r, i]
                    if v == v:
                        res[m] = abs(v - (a + b * i))
                        m += 1
                scale = 1.4826 * np.median(res[:m]) if m else 1.0
                if not scale > 0:
                    scale = 1.0
            for i in range(t):
                v = y[r, i]
                if v == v:
                    u = abs(v - (a + b * i)) / (c * scale)
                    w[i] = 1.0 if u <= 1.0 else 1.0 / u
        a_out[r] = a
        b_out[r] = b
    return a_out, b_out


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
    y3 = padded.reshape(s, days, day)
    idx3 = np.arange(days * day, dtype=np.float64).reshape(days, day)
    # alternate: line on what the profile leaves, profile on what the line leaves (starting from the
    # raw series: over whole days a daily rhythm does not tilt a line)
    prof = np.zeros((s, day))
    a = b = np.zeros(s)
    for _ in range(2):
        a, b = _robust_line((y3 - prof[:, None, :]).reshape(s, days * day))
        trend3 = a[:, None, None] + b[:, None, None] * idx3[None]
        prof = _median_over_days(y3 - trend3)
    resid3 = y3 - trend3 - prof[:, None, :]
    # weekday offsets: day d of the history is weekday d mod week_days
    offsets = np.zeros((s, week_days))
    first = np.arange(days) % week_days
    for wd in range(week_days):
        sel = resid3[:, first == wd, :]
        if sel.shape[1]:
            offsets[:, wd] = np.nan_to_num(nanmedian_rows(sel.reshape(s, -1)))
    future = t + np.arange(horizon)
    return (a[:, None] + b[:, None] * future + prof[:, future % day]
            + offsets[:, (future // day) % week_days])


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
    with _quiet():
        return np.nanmean(np.abs(forecast - actual), axis=1)


def mase(forecast: np.ndarray, actual: np.ndarray, history: np.ndarray, day: int) -> np.ndarray:
    """MAE scaled by the in-sample MAE of the seasonal-naive forecast (lag one day)."""
    h = np.asarray(history, dtype=np.float64)
    with _quiet():
        scale = np.nanmean(np.abs(h[:, day:] - h[:, :-day]), axis=1)
    return mae(forecast, actual) / np.where(scale > 0, scale, np.nan)
