"""`cnsched backtest`: forecasts from stored history, scored against what happened next.

Each path's series (a statistic of one metric, e.g. p95 of rtt_ms, read by sinks.queries.load_series,
averaged into steps of ``step_s`` seconds on one time grid) is split: the last
``horizon`` steps are the truth, everything before is the history the forecast sees. Reports MAE and
MASE (scaled by the in-sample seasonal-naive error) of the forecast and of the two baselines
(seasonal naive, last value).
"""

from __future__ import annotations

import numpy as np

from core.forecast import fit_forecast, last_value, mae, mase, seasonal_naive


class HistoryError(ValueError):
    """Not enough history; the message says how much is needed."""


def backtest(values: np.ndarray, horizon: int, day: int) -> dict:
    s, t = values.shape
    need = 2 * day + horizon
    if t < need:
        raise HistoryError(f"needs at least {need} steps of history (two days and the horizon), has {t}")
    history, truth = values[:, : t - horizon], values[:, t - horizon:]
    forecasts = {
        "forecast": fit_forecast(history, horizon, day),
        "seasonal_naive": seasonal_naive(history, horizon, day),
        "last_value": last_value(history, horizon),
    }
    out = {"series": s, "history_steps": t - horizon, "horizon_steps": horizon}
    for name, f in forecasts.items():
        out[f"{name}_mae"] = float(np.nanmean(mae(f, truth)))
        out[f"{name}_mase"] = float(np.nanmean(mase(f, truth, history, day)))
    return out
