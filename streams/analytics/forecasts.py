"""Forecasts from the history the sink keeps in DuckDB: a series' statistic for the next horizon, and
the preventive-rescheduling overlay (the worst forecast p95 of every path).

Readers open the file read-only for one query and close it (the sink opens it only per batch), so
they run beside the sink; a worker that cannot see the file answers 503 and keeps scheduling.

Time grid: steps of ``step_s`` seconds aligned to UTC midnight (slot 0 of the history is 00:00 UTC of
its first day, so the daily profile and the weekdays line up with the calendar); the history ends at
the last step that has data; the forecast covers the steps after it.
"""

from __future__ import annotations

import math

import numpy as np

from core.forecast import DEFAULT_MODEL, forecast, min_history
from sinks.duckdb_store import DuckStore
from sinks.queries import load_series, recent_windows

DAY_S = 86_400


class NotEnoughHistory(ValueError):
    """Too little history to forecast; ``needed_steps`` / ``have_steps`` say how much."""

    def __init__(self, needed_steps: int, have_steps: int, step_s: float) -> None:
        self.needed_steps, self.have_steps, self.step_s = needed_steps, have_steps, step_s
        super().__init__(f"needs {needed_steps} steps of {step_s:g} s ({needed_steps * step_s / 3600:g} h: the "
                         f"level's window and one horizon) of history, has {have_steps}")


def midnight_aligned(values: np.ndarray, first: float, step_s: float) -> tuple[np.ndarray, float]:
    """Series [S, T] starting at ``first`` padded with gaps back to the UTC midnight before it, and
    that midnight (the forecast's daily profile and weekdays then line up with the calendar)."""
    lead = int(round(first / step_s)) % int(round(DAY_S / step_s))
    padded = np.concatenate([np.full((values.shape[0], lead), np.nan), values], axis=1)
    return padded, first - lead * step_s


def path_series(con, src: str, dst: str, metric: str, stat: str, step_s: float) -> tuple[np.ndarray, float]:
    """One path's (or, with dst '', one node's) statistic per step on the midnight-aligned grid, and
    the grid's start."""
    paths, values, first = load_series(con, metric, stat, step_s, src=src, dst=dst)
    if not paths:
        return np.zeros(0), 0.0
    values, start = midnight_aligned(values, first, step_s)
    return values[0], start


def forecast_series(values: np.ndarray, start: float, step_s: float, horizon_steps: int) -> dict:
    """The forecast after ``values`` (a midnight-aligned series) or NotEnoughHistory."""
    per_day = int(round(DAY_S / step_s))
    observed = np.flatnonzero(np.isfinite(values))
    have = int(observed[-1] - observed[0] + 1) if observed.size else 0
    if have < min_history(horizon_steps):
        raise NotEnoughHistory(min_history(horizon_steps), have, step_s)
    f = forecast(values[None, :], horizon_steps, per_day)
    t0 = start + len(values) * step_s
    return {"history_steps": have, "from": t0, "quantile": DEFAULT_MODEL.quantile, "seasonal": bool(f.seasonal[0]),
            "points": [{"t": t0 + k * step_s, "value": round(float(v), 6), "upper": round(float(u), 6)}
                       for k, (v, u) in enumerate(zip(f.p50[0], f.upper[0], strict=True))]}


def forecast_path(path, src: str, dst: str, metric: str, stat: str, step_s: float, horizon_steps: int,
                  timeout_s: float = 5.0, shown_steps: int = 0) -> dict:
    """The forecast, and with ``shown_steps`` the newest steps of the history it came from (gaps left
    out) as ``history``."""
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        values, start = path_series(store.con, src, dst, metric, stat, step_s)
    out = forecast_series(values, start, step_s, horizon_steps)
    if shown_steps > 0:
        first = max(len(values) - shown_steps, 0)
        out["history"] = [{"t": start + k * step_s, "value": round(float(values[k]), 6)}
                          for k in range(first, len(values)) if np.isfinite(values[k])]
    return out


def worst_forecasts(path, metric: str, stat: str, step_s: float, horizon_steps: int, days: float = 7.0,
                    timeout_s: float = 5.0) -> dict[tuple[str, str], float]:
    """(src, dst) -> the highest upper-quantile forecast over the horizon (preventive rescheduling acts
    on a bad outcome that is likely enough, not on the point), for every path with the forecast's
    minimum history (``min_history``) in the last ``days``; one vectorised fit for all of them."""
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        paths, values, first = load_series(store.con, metric, stat, step_s, days)
    if not paths:
        return {}
    per_day = int(round(DAY_S / step_s))
    values, _ = midnight_aligned(values, first, step_s)
    finite = np.isfinite(values)
    first_i = np.argmax(finite, axis=1)
    last_i = values.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    ok = finite.any(axis=1) & (last_i - first_i + 1 >= min_history(horizon_steps))
    if not ok.any():
        return {}
    worst = np.nanmax(forecast(values[ok], horizon_steps, per_day).upper, axis=1)
    chosen = [p for p, keep in zip(paths, ok, strict=True) if keep]
    return {p: float(w) for p, w in zip(chosen, worst, strict=True) if math.isfinite(w)}


def stored_p95s(path, last: int, timeout_s: float = 5.0, step_s: float = 0.0
                ) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray]:
    """Every path's ``last`` newest window p95 rtt (of the last day; one per ``step_s`` step when
    given): (paths, ends, p95s), oldest first — the degradation detector's memory, read back at start."""
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        return recent_windows(store.con, "rtt_ms", "p95", last, step_s=step_s)
