"""`cnsched backtest`: the live forecaster on stored history, scored against what happened next.

Each path's series (a statistic of one metric, e.g. p95 of rtt_ms, read by sinks.queries.load_series
into steps of ``step_s`` seconds on one time grid) is aligned to UTC midnight like the live forecast
(streams.analytics.forecasts). Origins: every ``every`` steps (default: the horizon) over the last
``days`` days; at each origin every series with the live path's minimum history (``min_history``: the
level's window and one horizon of span)
within the ``history_days`` before it is forecast from exactly that history, vectorised over series,
beside last value and seasonal naive. MASE divides a forecast's MAE over the held-out horizon by the
in-sample MAE of the one-step naive forecast on that same history (mean |change| between known
samples), so a MASE below 1 beats "the next sample equals this one" on the series' own scale.
Series that are never scored are counted by reason.
"""

from __future__ import annotations

import numpy as np

from core.forecast import forecast, last_value, mae, min_history, naive_scale, seasonal_naive
from core.quiet import quiet_nan_warnings
from streams.analytics.forecasts import midnight_aligned

METHODS = ("forecast", "last_value", "seasonal_naive")
SCALE = "in-sample MAE of the one-step naive forecast"
SKIP_SHORT = "less than the minimum history before every origin"
SKIP_NO_TRUTH = "no data in any held-out horizon"
SKIP_CONSTANT = "history constant at every origin (naive error 0)"


class HistoryError(ValueError):
    """Not enough history; the message says how much is needed."""


def backtest(values: np.ndarray, first: float, step_s: float, horizon: int, day: int, days: float = 7.0,
             every: int = 0, history_days: float = 7.0, rows: bool = False, names: list | None = None,
             trace: int | None = None, tick=None) -> dict:
    """Scores of the forecaster and the baselines over rolling origins (module docstring). With
    ``trace`` (a series index), ``out["trace"]`` holds that series over the scored span beside the
    forecast and its upper quantile made at each origin (NaN where none was made): for a plot.
    ``tick(1)`` after each origin (a progress bar)."""
    values = np.asarray(values, np.float64)
    need = min_history(horizon)
    if values.shape[1] < need + horizon:
        raise HistoryError(f"needs at least {need + horizon} steps of history (the forecast's minimum and the "
                           f"held-out horizon), has {values.shape[1]}")
    aligned, _ = midnight_aligned(values, first, step_s)
    s, t = aligned.shape
    every = every or horizon
    lo_origin = max(need - 1, t - horizon - int(round(days * day)))  # origins after it
    origins = list(range(t - horizon, lo_origin, -every))[::-1]
    span = int(round(history_days * day))
    err = {m: np.full((len(origins), s), np.nan) for m in METHODS}
    state = {"short": np.ones(s, bool), "no_truth": np.ones(s, bool), "constant": np.ones(s, bool)}
    t0 = origins[0] if origins else t
    band = np.full((2, t - t0), np.nan)  # the traced series' p50 and upper at each origin's horizon
    for k, o in enumerate(origins):
        if tick is not None and k:
            tick(1)
        lo = max(0, (o - span) // day * day)  # whole days: the grid stays midnight-aligned
        hist, truth = aligned[:, lo:o], aligned[:, o:o + horizon]
        finite = np.isfinite(hist)
        first_i = np.argmax(finite, axis=1)
        last_i = hist.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
        long_enough = finite.any(axis=1) & (last_i - first_i + 1 >= need)
        has_truth = np.isfinite(truth).any(axis=1)
        scale = naive_scale(hist)
        ok = long_enough & has_truth & (scale > 0)
        state["short"] &= ~long_enough
        state["no_truth"] &= ~(long_enough & has_truth)
        state["constant"] &= ~ok
        if not ok.any():
            continue
        h = hist[ok]
        ours = forecast(h, horizon, day)
        preds = {"forecast": ours.p50, "last_value": last_value(h, horizon),
                 "seasonal_naive": seasonal_naive(h, horizon, day)}
        for m, f in preds.items():
            err[m][k, ok] = mae(f, truth[ok]) / scale[ok]
        if trace is not None and ok[trace]:
            at = int(ok[:trace].sum())
            band[:, o - t0:o - t0 + horizon] = ours.p50[at], ours.upper[at]
    out = _summary(err, state, origins, horizon, s, rows, names)
    if trace is not None:
        out["trace"] = {"series": names[trace] if names else trace, "truth": aligned[trace, t0:],
                        "p50": band[0], "upper": band[1]}
    return out


def _summary(err: dict, state: dict, origins: list, horizon: int, s: int, rows: bool, names) -> dict:
    scored = ~np.isnan(err["forecast"]).all(axis=0) if origins else np.zeros(s, bool)
    skipped = {SKIP_SHORT: int(state["short"].sum()),
               SKIP_NO_TRUTH: int((state["no_truth"] & ~state["short"]).sum()),
               SKIP_CONSTANT: int((state["constant"] & ~state["no_truth"]).sum())}
    out = {"series": s, "series_scored": int(scored.sum()), "skipped": {k: v for k, v in skipped.items() if v},
           "origins": len(origins), "horizon_steps": horizon, "scale": SCALE,
           "scores": int(np.isfinite(err["forecast"]).sum())}
    with quiet_nan_warnings():
        for m in METHODS:
            e = err[m][np.isfinite(err[m])]
            out[f"{m}_mase"] = float(e.mean()) if e.size else None
            out[f"{m}_mase_median"] = float(np.median(e)) if e.size else None
        per_series = {m: np.nanmean(err[m], axis=0) if origins else np.full(s, np.nan) for m in METHODS}
    f, lv = out["forecast_mase"], out["last_value_mase"]
    out["forecast_vs_last_value"] = f / lv if f is not None and lv else None
    if rows:
        out["rows"] = [{"series": (names[i] if names else i), **{m: _num(per_series[m][i]) for m in METHODS}}
                       for i in range(s) if scored[i]]
    return out


def _num(v) -> float | None:
    return None if not np.isfinite(v) else round(float(v), 6)
