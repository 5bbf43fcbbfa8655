"""`cnsched bench forecast`: many series of 1-minute history forecast at once, beside seasonal naive."""

from __future__ import annotations

import time

import numpy as np


def bench_forecast(series: int = 10_000, days: int = 7, horizon: int = 60, seed: int = 0) -> dict:
    """Forecast ``series`` series of ``days`` days of 1-minute history, beside seasonal naive; the
    accuracy of both against the truth of the next ``horizon`` minutes."""
    from core.forecast import fit_forecast, mae, seasonal_naive

    day = 1440
    rng = np.random.default_rng(seed)
    t = np.arange(days * day + horizon)
    base = rng.uniform(1, 100, (series, 1))
    clean = (base + base * rng.uniform(-0.02, 0.05, (series, 1)) * t / day
             + base * rng.uniform(0.1, 0.5, (series, 1)) * np.sin(2 * np.pi * t / day + rng.uniform(0, 6.3, (series, 1))))
    history = clean[:, : days * day] + rng.normal(0, 1, (series, days * day)) * base * 0.03
    history[rng.random(history.shape) < 0.01] *= 10
    history[rng.random(history.shape) < 0.02] = np.nan
    truth = clean[:, days * day:]
    fit_forecast(history[:2], horizon, day)  # compile outside the timing
    t0 = time.perf_counter()
    ours = fit_forecast(history, horizon, day)
    fit_s = time.perf_counter() - t0
    naive = seasonal_naive(history, horizon, day)
    return {"series": series, "history_minutes": days * day, "horizon_minutes": horizon,
            "forecast_seconds": fit_s, "mae": float(np.nanmean(mae(ours, truth))),
            "seasonal_naive_mae": float(np.nanmean(mae(naive, truth)))}
