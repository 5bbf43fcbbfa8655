"""`cnsched bench forecast`: the forecaster beside last value, seasonal naive and statsforecast's
AutoETS, for accuracy and speed, on two series classes:

- diurnal: ``series`` synthetic 1-minute series of ``days`` days (daily rhythm, trend, 3 % noise, 1 %
  spikes x10, 2 % gaps), the next ``horizon`` minutes against the clean truth;
- real RTT: the labelled traces (`../shared/data/rtt/artificial_labelled`, 4-minute samples), rolling
  origins every hour after 7 days of history, the next hour against what followed.

MASE is MAE over the in-sample one-step naive MAE of the history each forecast saw. AutoETS
(non-seasonal: ETS takes no 1-day season at these steps; gaps forward-filled) costs ~0.2-0.7 s a
series, so it runs on ``ets_series`` of the diurnal series and on the real origins every
``ets_every_h`` hours; ours and the baselines are scored on the same cases beside it, and its speed
is given per series.
"""

from __future__ import annotations

import os
import time

import numpy as np

from core.forecast import forecast, last_value, mae, naive_scale, seasonal_naive

DEFAULT_RTT_DIR = os.path.join("..", "shared", "data", "rtt", "artificial_labelled")


def _ets(history: np.ndarray, horizon: int):
    """AutoETS per series (None when statsforecast is not installed: pip install -e '.[dev]')."""
    try:
        from statsforecast.models import AutoETS
    except ImportError:
        return None
    out = np.full((history.shape[0], horizon), np.nan)
    for i, row in enumerate(history):
        v = row.copy()
        ok = np.isfinite(v)
        if ok.sum() < 2:
            continue
        idx = np.where(ok, np.arange(v.size), 0)
        np.maximum.accumulate(idx, out=idx)
        v = v[idx][np.argmax(ok):]  # forward-filled from the first known sample
        out[i] = AutoETS(season_length=1).forecast(y=v, h=horizon)["mean"]
    return out


def _scores(preds: dict, truth: np.ndarray, history: np.ndarray) -> dict:
    return {k: float(np.nanmean(v)) for k, v in _scores_rows(preds, truth, history).items()}


def diurnal(series: int, days: int, horizon: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    day = 1440
    rng = np.random.default_rng(seed)
    t = np.arange(days * day + horizon)
    base = rng.uniform(1, 100, (series, 1))
    clean = (base + base * rng.uniform(-0.02, 0.05, (series, 1)) * t / day
             + base * rng.uniform(0.1, 0.5, (series, 1)) * np.sin(2 * np.pi * t / day + rng.uniform(0, 6.3, (series, 1))))
    history = clean[:, : days * day] + rng.normal(0, 1, (series, days * day)) * base * 0.03
    history[rng.random(history.shape) < 0.01] *= 10
    history[rng.random(history.shape) < 0.02] = np.nan
    return history, clean[:, days * day:]


def bench_diurnal(series: int, days: int, horizon: int, ets_series: int) -> dict:
    day = 1440
    history, truth = diurnal(series, days, horizon)
    forecast(history[:2], horizon, day)  # compile outside the timing
    t0 = time.perf_counter()
    ours = forecast(history, horizon, day).p50
    ours_s = time.perf_counter() - t0
    out = {"series": series, "history_minutes": days * day, "horizon_minutes": horizon, "forecast_seconds": ours_s,
           **{f"mase_{k}": v for k, v in _scores({"ours": ours, "last_value": last_value(history, horizon),
                                                   "seasonal_naive": seasonal_naive(history, horizon, day)},
                                                  truth, history).items()}}
    k = min(ets_series, series)
    t0 = time.perf_counter()
    ets = _ets(history[:k], horizon) if k else None
    if ets is not None:
        per = (time.perf_counter() - t0) / k
        sub = _scores({"ours": ours[:k], "autoets": ets}, truth[:k], history[:k])
        out.update({"autoets_series": k, "mase_ours_on_them": sub["ours"], "mase_autoets": sub["autoets"],
                    "autoets_seconds_per_series": per, "speed_vs_autoets": per * series / ours_s})
    return out


def bench_real(directory: str, horizon_h: float = 1.0, history_days: int = 7, ets_every_h: float = 24.0) -> dict:
    from streams.analytics.rtt_series import load_dir

    series = load_dir(directory)
    step = series[0].step_s
    day, horizon = int(round(86400 / step)), int(round(horizon_h * 3600 / step))
    hist, ets_every = history_days * day, int(round(ets_every_h * 3600 / step))
    totals: dict[str, list] = {}
    at_ets: dict[str, list] = {}
    t_ours = t_ets = 0.0
    for s in series:
        lead = int(round((s.start % 86400) / step))
        for o in range(hist, s.rtt.size - horizon + 1, horizon):
            truth = s.rtt[None, o:o + horizon]
            if not np.isfinite(truth).any():
                continue
            lo = o - hist
            h = np.r_[np.full((lead + lo) % day, np.nan), s.rtt[lo:o]][None]  # index 0 at a UTC midnight
            t0 = time.perf_counter()
            ours = forecast(h, horizon, day).p50
            t_ours += time.perf_counter() - t0
            preds = {"ours": ours, "last_value": last_value(h, horizon), "seasonal_naive": seasonal_naive(h, horizon, day)}
            for k, v in _scores_rows(preds, truth, h).items():
                totals.setdefault(k, []).extend(v)
            if lo % ets_every == 0:
                t0 = time.perf_counter()
                ets = _ets(h, horizon)
                t_ets += time.perf_counter() - t0
                if ets is not None:
                    for k, v in _scores_rows({"ours": ours, "last_value": preds["last_value"], "autoets": ets},
                                             truth, h).items():
                        at_ets.setdefault(k, []).extend(v)
    n = len(totals["ours"])
    out = {"series": len(series), "step_s": step, "horizon_steps": horizon, "history_days": history_days,
           "origins": n, **{f"mase_{k}": float(np.nanmean(v)) for k, v in totals.items()}}
    out["ours_vs_last_value"] = out["mase_ours"] / out["mase_last_value"]
    if at_ets:
        m = len(at_ets["ours"])
        out.update({"autoets_origins": m, **{f"mase_{k}_at_autoets_origins": float(np.nanmean(v)) for k, v in at_ets.items()},
                    "autoets_seconds_per_forecast": t_ets / m, "ours_seconds_per_forecast": t_ours / n,
                    "speed_vs_autoets": (t_ets / m) / (t_ours / n)})
    return out


def _scores_rows(preds: dict, truth: np.ndarray, history: np.ndarray) -> dict:
    """Each method's MASE per series (core.forecast.mase, the naive scale computed once)."""
    scale = naive_scale(history)
    return {k: list(mae(v, truth) / np.where(scale > 0, scale, np.nan)) for k, v in preds.items()}


def bench_forecast(series: int = 10_000, days: int = 7, horizon: int = 60, ets_series: int = 20,
                   rtt_dir: str | None = DEFAULT_RTT_DIR) -> dict:
    out = {"diurnal": bench_diurnal(series, days, horizon, ets_series)}
    if rtt_dir and os.path.isdir(rtt_dir):
        out["real_rtt"] = bench_real(rtt_dir)
    return out
