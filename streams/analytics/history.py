"""What the worker and the CLI learn from the history the sink keeps in DuckDB: forecasts of a path's
metric, the preventive-rescheduling overlay (worst forecast p95 per path) and learned alphas.

All readers open the file read-only for one query and close it (the sink opens it only per batch),
so they run beside the sink; a worker that cannot see the file answers 503 and keeps scheduling.

Time grid of a forecast: steps of ``step_s`` seconds aligned to UTC midnight (slot 0 of the history
is 00:00 UTC of its first day, so the daily profile and the weekdays line up with the calendar);
the history ends at the last step that has data; the forecast covers the steps after it.
"""

from __future__ import annotations

import math

import numpy as np

from core.alpha import learn_alpha
from core.forecast import fit_forecast
from core.vocabulary import TYPE_ALPHAS
from sinks.duckdb_store import DuckStore, StoreError
from streams.analytics.backtest import STATS, load_series

DAY_S = 86_400


class NotEnoughHistory(ValueError):
    """Too little history to forecast; ``needed_steps`` / ``have_steps`` say how much."""

    def __init__(self, needed_steps: int, have_steps: int, step_s: float) -> None:
        self.needed_steps, self.have_steps, self.step_s = needed_steps, have_steps, step_s
        super().__init__(f"needs {needed_steps} steps of {step_s:g} s ({needed_steps * step_s / 3600:g} h: two "
                         f"days) of history, has {have_steps}")


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
    if have < 2 * per_day:
        raise NotEnoughHistory(2 * per_day, have, step_s)
    f = fit_forecast(values[None, :], horizon_steps, per_day)[0]
    t0 = start + len(values) * step_s
    return {"history_steps": have, "from": t0,
            "points": [{"t": t0 + k * step_s, "value": round(float(v), 6)} for k, v in enumerate(f)]}


def forecast_path(path, src: str, dst: str, metric: str, stat: str, step_s: float, horizon_steps: int,
                  timeout_s: float = 5.0) -> dict:
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        values, start = path_series(store.con, src, dst, metric, stat, step_s)
    return forecast_series(values, start, step_s, horizon_steps)


def worst_forecasts(path, metric: str, stat: str, step_s: float, horizon_steps: int, days: float = 7.0,
                    timeout_s: float = 5.0) -> dict[tuple[str, str], float]:
    """(src, dst) -> the highest forecast value over the horizon, for every path with two days of
    history in the last ``days`` (preventive rescheduling reads p95 rtt_ms); one vectorised fit for
    all of them."""
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        paths, values, first = load_series(store.con, metric, stat, step_s, days)
    if not paths:
        return {}
    per_day = int(round(DAY_S / step_s))
    values, _ = midnight_aligned(values, first, step_s)
    finite = np.isfinite(values)
    first_i = np.argmax(finite, axis=1)
    last_i = values.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    ok = finite.any(axis=1) & (last_i - first_i + 1 >= 2 * per_day)
    if not ok.any():
        return {}
    f = fit_forecast(values[ok], horizon_steps, per_day)
    worst = np.nanmax(f, axis=1)
    chosen = [p for p, keep in zip(paths, ok, strict=True) if keep]
    return {p: float(w) for p, w in zip(chosen, worst, strict=True) if math.isfinite(w)}


FINISHED_SQL = """
WITH placed AS (  -- the first placement of each task: the scores it was placed with
    SELECT task_id, arg_min(task_type, decided_at) AS task_type, arg_min(compute_score, decided_at) AS compute,
           arg_min(network_score, decided_at) AS network, arg_min(alpha, decided_at) AS alpha
    FROM decisions WHERE status = 'placed' AND task_type IS NOT NULL GROUP BY task_id),
done AS (
    SELECT task_id, max(throughput) AS achieved FROM task_events
    WHERE event = 'finished' AND throughput IS NOT NULL GROUP BY task_id)
SELECT p.task_type, p.compute, p.network, d.achieved
FROM placed p JOIN done d USING (task_id)
WHERE p.alpha < 1 AND p.compute IS NOT NULL AND p.network IS NOT NULL  -- alpha 1 records no network score
ORDER BY p.task_type, p.task_id
"""


def learned_alphas(con, defaults: dict[str, float] | None = None, min_tasks: int = 50) -> list[dict]:
    """Per task type with finished tasks: the learned alpha, its rank correlation, how many tasks,
    and whether there are enough (``min_tasks``) to use it as the type's default (``defaults``:
    alphas before learning, the built-in ones unless given)."""
    defaults = TYPE_ALPHAS if defaults is None else defaults
    rows = con.execute(FINISHED_SQL).fetchall()
    by_type: dict[str, list[tuple]] = {}
    for r in rows:
        by_type.setdefault(r[0], []).append(r[1:])
    out = []
    for task_type, items in sorted(by_type.items()):
        c, n, y = (np.array(col, dtype=np.float64) for col in zip(*items, strict=True))
        default = defaults.get(task_type, 0.5)
        alpha, rho = learn_alpha(c, n, y, default=default)
        out.append({"task_type": task_type, "tasks": len(items), "default_alpha": default, "learned_alpha": alpha,
                    "spearman": None if math.isnan(rho) else round(rho, 4),
                    "in_use": len(items) >= min_tasks and not math.isnan(rho)})
    return out


def load_learned_alphas(path, min_tasks: int, timeout_s: float = 5.0) -> list[dict]:
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        return learned_alphas(store.con, min_tasks=min_tasks)


__all__ = ["STATS", "NotEnoughHistory", "StoreError", "forecast_path", "worst_forecasts", "learned_alphas",
           "load_learned_alphas", "path_series", "forecast_series"]
