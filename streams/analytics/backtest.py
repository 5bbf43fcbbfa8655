"""`cnsched backtest`: forecasts from stored history, scored against what happened next.

Each path's series (a statistic of one metric, e.g. p95 of rtt_ms) is read from the DuckDB `windows`
table, averaged into steps of ``step_s`` seconds on one time grid, and split: the last
``horizon`` steps are the truth, everything before is the history the forecast sees. Reports MAE and
MASE (scaled by the in-sample seasonal-naive error) of the forecast and of the two baselines
(seasonal naive, last value).
"""

from __future__ import annotations

import numpy as np

from core.forecast import fit_forecast, last_value, mae, mase, seasonal_naive

STATS = ("mean", "p50", "p95", "p99", "min", "max")


class HistoryError(ValueError):
    """Not enough history; the message says how much is needed."""


def load_series(con, metric: str, stat: str, step_s: float, days: float | None = None, *, src: str | None = None,
                dst: str | None = None, since: float | None = None
                ) -> tuple[list[tuple[str, str]], np.ndarray, float]:
    """(series as (src, dst), values[S, T] with NaN gaps, time of the first step) from the windows
    table: the statistic averaged per step of ``step_s`` seconds. Paths only unless ``dst`` is given
    ('' for node-local series); ``src`` picks one source; ``since`` a start time; ``days`` the last
    days before the newest window of the metric. Columns come out of DuckDB as arrays and land in the
    matrix by fancy indexing (no Python loop over rows)."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}")
    params: dict = {"step": step_s, "metric": metric}
    where = [f"metric = $metric AND {stat} IS NOT NULL", "dst <> ''" if dst is None else "dst = $dst"]
    for name, value, clause in (("src", src, "src = $src"), ("dst", dst, None), ("since", since, "window_start >= $since"),
                                ("days", days, "window_start >= (SELECT max(window_start) FROM windows "
                                               "WHERE metric = $metric) - $days * 86400")):
        if value is not None:
            params[name] = value
            if clause:
                where.append(clause)
    cols = con.execute(
        f"""SELECT dense_rank() OVER (ORDER BY src, dst) - 1 AS path, src, dst,
                   floor(window_start / $step)::BIGINT AS step, avg({stat}) AS v
            FROM windows WHERE {' AND '.join(where)}
            GROUP BY src, dst, step ORDER BY path, step""",
        params,
    ).fetchnumpy()
    if len(cols["path"]) == 0:
        return [], np.zeros((0, 0)), 0.0
    path = np.asarray(cols["path"], dtype=np.int64)
    step = np.asarray(cols["step"], dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, path[1:] != path[:-1]])
    paths = [(str(cols["src"][i]), str(cols["dst"][i])) for i in starts]
    first, last = int(step.min()), int(step.max())
    values = np.full((len(paths), last - first + 1), np.nan)
    values[path, step - first] = np.asarray(cols["v"], dtype=np.float64)
    return paths, values, float(first * step_s)


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
