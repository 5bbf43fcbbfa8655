"""Energy-aware scoring: cheaper or greener nodes score higher for tasks that ask.

Per node, with its power draw P (kW, at full load), energy price c ($/MWh), carbon intensity g
(gCO2/kWh) and compute W (TFLOPS-equivalent in standard units, core.metering.compute_capability):
- cost per unit of compute = c x P / 1000 / W ($ per TFLOPS-hour); carbon per unit = g x P / W —
  what a unit of work costs, not what an hour of the node costs: a node drawing twice the power that
  computes three times as fast is the cheaper one;
- nodes without a compute figure (no accelerator, no benchmark) are compared among themselves per
  hour instead (c x P / 1000, g x P);
- each is scored 0-100 within its group of nodes that report it: 100 x (worst - x) / (worst - best)
  (all equal: 100), unknown (no figure or no power draw): 50, neutral;
- energy score = (1 - carbon_weight) x cost score + carbon_weight x carbon score (one of them
  unknown: the other alone).
A task with cost sensitivity w > 0 is scored (1 - w) x composite + w x energy score; w = 0 leaves
every score exactly as it was, and infeasible nodes (-inf) stay infeasible.
"""

from __future__ import annotations

import numpy as np

NEUTRAL = 50.0


def _score_low_is_good(x: np.ndarray) -> np.ndarray:
    out = np.full(x.shape, np.nan)
    known = np.isfinite(x)
    if known.any():
        lo, hi = x[known].min(), x[known].max()
        out[known] = 100.0 if hi - lo <= 1e-12 * max(abs(hi), 1.0) else 100.0 * (hi - x[known]) / (hi - lo)
    return out


def _per_unit_scores(per_hour: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Scores of ``per_hour / work`` among nodes with work, of ``per_hour`` among the others."""
    has = np.isfinite(work) & (work > 0)
    out = np.full(per_hour.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[has] = _score_low_is_good(per_hour[has] / work[has])
    out[~has] = _score_low_is_good(per_hour[~has])
    return out


def energy_scores(price_per_mwh, carbon_g_per_kwh, power_kw, carbon_weight: float = 0.5,
                  work_tflops=None) -> np.ndarray:
    """float64[N] 0-100 (NaN inputs: unknown); ``work_tflops`` None: every node per hour."""
    price = np.asarray(price_per_mwh, dtype=np.float64)
    carbon = np.asarray(carbon_g_per_kwh, dtype=np.float64)
    power = np.asarray(power_kw, dtype=np.float64)
    work = np.full(power.shape, np.nan) if work_tflops is None else np.asarray(work_tflops, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        cost_s = _per_unit_scores(price * power / 1000.0, work)
        carbon_s = _per_unit_scores(carbon * power, work)
    both = np.isfinite(cost_s) & np.isfinite(carbon_s)
    out = np.where(both, (1 - carbon_weight) * cost_s + carbon_weight * carbon_s,
                   np.where(np.isfinite(cost_s), cost_s, np.where(np.isfinite(carbon_s), carbon_s, NEUTRAL)))
    return out


def blend(scores: np.ndarray, sensitivity: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """scores[T, N] with each task's cost sensitivity[T] mixing in energy[N]; rows with 0 unchanged."""
    s = np.asarray(scores)
    w = np.asarray(sensitivity, dtype=np.float64).reshape(-1, 1)
    out = s.copy()
    rows = np.flatnonzero(w[:, 0] > 0)  # only these change (most tasks do not ask: no work for them)
    if rows.size:
        part, wr = s[rows], w[rows]
        with np.errstate(invalid="ignore"):
            mixed = (1.0 - wr) * part + wr * np.asarray(energy, dtype=np.float64)[None, :]
        out[rows] = np.where(np.isfinite(part), mixed, part).astype(s.dtype)
    return out
