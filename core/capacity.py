"""Capacity planning: a weekly demand forecast with its interval, and the cards that keep the queue's
p95 wait under a target (pure: arrays in, numbers out).

Forecast: a least-squares line through the weeks seen (the last value when fewer than three), its
prediction interval from the residuals (Student t at the given level; a line through three or more
points has n - 2 degrees of freedom). Demand cannot go below zero.

Cards needed: the queue of one accelerator class as M/M/c (Erlang C) with jobs as "servers" of the
mean job size: arrivals ``lam`` jobs per hour, each holding ``cards_per_job`` cards for ``hours_per_job``.
With c servers and offered load a = lam x hours_per_job, the chance a job waits is C(c, a) and the
wait beyond t is P(W > t) = C(c, a) exp(-(c / hours_per_job - lam) t). The cards needed are the fewest
c (x cards_per_job) with P(W > target) <= 1 - quantile.
"""

from __future__ import annotations

import math

import numpy as np

T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
T_95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812}


def _t(level: float, dof: int) -> float:
    """Two-sided Student t quantile for level 0.9 or 0.95 (normal beyond 10 degrees of freedom)."""
    table, z = (T_95, 1.645) if level <= 0.9 else (T_975, 1.960)
    return table.get(dof, z)


def weekly_forecast(y: np.ndarray, horizon: int, level: float = 0.9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) for the next ``horizon`` weeks after ``y`` (NaN weeks left out)."""
    y = np.asarray(y, dtype=float)
    x = np.flatnonzero(np.isfinite(y)).astype(float)
    v = y[np.isfinite(y)]
    ahead = len(y) + np.arange(horizon, dtype=float)
    if v.size == 0:
        nan = np.full(horizon, np.nan)
        return nan, nan, nan
    if v.size < 3:
        mean = np.full(horizon, v[-1])
        spread = np.full(horizon, np.nan if v.size == 1 else abs(v[-1] - v[0]))
        return mean, np.maximum(mean - spread, 0.0), mean + spread
    slope, intercept = np.polyfit(x, v, 1)
    mean = intercept + slope * ahead
    resid = v - (intercept + slope * x)
    dof = v.size - 2
    s = math.sqrt(float(resid @ resid) / dof) if dof > 0 else 0.0
    sxx = float(((x - x.mean()) ** 2).sum())
    half = _t(level, dof) * s * np.sqrt(1 + 1 / v.size + (ahead - x.mean()) ** 2 / sxx)
    return np.maximum(mean, 0.0), np.maximum(mean - half, 0.0), np.maximum(mean + half, 0.0)


def erlang_c(c: int, a: float) -> float:
    """The chance an arrival waits in M/M/c with offered load a (erlangs); 1 when c <= a."""
    if c <= a:
        return 1.0
    term, total = 1.0, 1.0  # a^k / k!, from k = 0
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c * c / (c - a)  # a^c / c! x c / (c - a)
    return last / (total + last)


def wait_exceeds(c: int, lam: float, hours_per_job: float, t: float) -> float:
    """P(W > t) in M/M/c: arrivals lam per hour, mean service hours_per_job."""
    a = lam * hours_per_job
    if c <= a:
        return 1.0
    return erlang_c(c, a) * math.exp(-(c / hours_per_job - lam) * t)


def cards_for_wait(lam: float, hours_per_job: float, cards_per_job: float, target_h: float,
                   quantile: float = 0.95, max_servers: int = 100_000) -> int:
    """The fewest cards (whole jobs' worth) with the ``quantile`` of the wait at most ``target_h``."""
    if lam <= 0 or hours_per_job <= 0:
        return 0
    c = max(1, math.floor(lam * hours_per_job) + 1)
    while c < max_servers and wait_exceeds(c, lam, hours_per_job, target_h) > 1 - quantile:
        c += 1
    return int(math.ceil(c * cards_per_job))
