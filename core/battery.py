"""Battery sizing that smooths a facility's power draw (pure numpy, vectorised; no loop over samples).

For a load P_load[t] in MW at a fixed interval of ``interval_s`` seconds and a window of W samples:

1. target P_target[t]: the mean of the window-aligned block of W samples that contains t (tumbling;
   a last, partial block is averaged over the samples it has), or with ``trailing`` the mean of the
   last W samples up to and including t (fewer at the start: the mean of samples 0..t);
2. compensation P_batt[t] = P_load[t] - P_target[t] (positive: the battery discharges);
3. power capacity (MW) = max |P_batt| x margin;
4. energy (kWh; MW x s x 1000 / 3600):
   - discharge: the largest energy of one uninterrupted discharge run (consecutive samples with
     P_batt > 0): sum of P_batt x interval over the run;
   - charge: likewise for runs with P_batt < 0 (energy as a positive number);
   - state-of-charge swing: max - min of the running sum of P_batt x interval, the running sum
     starting at 0 before the first sample;
   - window discharge (the seed's rule): the largest energy discharged within any W consecutive
     samples (sum of the positive P_batt x interval in a sliding window: a charge in between is not
     counted on, since the grid may not allow it);
   - recommended energy capacity = max(discharge, window discharge, charge, swing) x margin / depth
     of discharge;
5. ramps per minute: a ramp is |P[t+1] - P[t]| / (interval in minutes); original max ramp is the
   load's; smoothed max ramp is the grid ramp limit when one is given, else the target curve's;
   smoothing rate = (1 - smoothed / original) x 100 % (0 when the load never ramps).

The target curve's own max ramp is returned too: with a ramp limit below it, the limit is a promise
the target alone does not keep (``ramp_limit_met`` False), which an operator should know.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KWH_PER_MW_S = 1000.0 / 3600.0


class BatteryInputError(ValueError):
    """Input that cannot be sized; the message says what is wrong."""


@dataclass(frozen=True)
class Sizing:
    power_capacity_mw: float
    discharge_energy_kwh: float
    charge_energy_kwh: float
    soc_swing_kwh: float
    window_discharge_kwh: float
    recommended_energy_kwh: float
    original_max_ramp_mw_per_min: float
    smoothed_max_ramp_mw_per_min: float
    smoothing_rate_pct: float
    target_max_ramp_mw_per_min: float
    ramp_limit_met: bool
    target_mw: np.ndarray
    compensation_mw: np.ndarray


def validate(load_mw, interval_s: float, window: int, margin: float = 1.2, ramp_limit: float | None = None,
             dod: float = 0.9) -> np.ndarray:
    p = np.asarray(load_mw, dtype=np.float64)
    if p.ndim != 1:
        raise BatteryInputError("power must be one series of values")
    if not (np.isfinite(interval_s) and interval_s > 0):
        raise BatteryInputError(f"interval must be a positive number of seconds, got {interval_s}")
    if int(window) != window or window < 1:
        raise BatteryInputError(f"window must be a whole number of samples >= 1, got {window}")
    if p.size < window:
        raise BatteryInputError(f"{p.size} sample(s) is fewer than one window of {int(window)}")
    bad = np.flatnonzero(~np.isfinite(p) | (p < 0))
    if bad.size:
        i = int(bad[0])
        raise BatteryInputError(f"power must be finite and >= 0 MW: sample {i + 1} is {p[i]} "
                                f"({bad.size} invalid sample(s))")
    if not (np.isfinite(margin) and margin > 0):
        raise BatteryInputError(f"margin must be > 0, got {margin}")
    if not (0 < dod <= 1):
        raise BatteryInputError(f"depth of discharge must be in (0, 1], got {dod}")
    if ramp_limit is not None and not (np.isfinite(ramp_limit) and ramp_limit > 0):
        raise BatteryInputError(f"ramp limit must be > 0 MW/min, got {ramp_limit}")
    return p


def block_target(p: np.ndarray, window: int) -> np.ndarray:
    """Each sample's tumbling block mean (blocks start at sample 0; the last may be partial)."""
    starts = np.arange(0, p.size, window)
    sums = np.add.reduceat(p, starts)
    sizes = np.minimum(starts + window, p.size) - starts
    return np.repeat(sums / sizes, sizes)


def trailing_target(p: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` samples up to each sample (of samples 0..t at the start)."""
    c = np.concatenate([[0.0], np.cumsum(p)])
    idx = np.arange(1, p.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def run_energies(x: np.ndarray, interval_s: float) -> tuple[float, float]:
    """(largest discharge run, largest charge run) in kWh: runs of consecutive samples with x > 0
    (x < 0); a zero sample ends a run."""
    sign = np.sign(x)
    if x.size == 0:
        return 0.0, 0.0
    starts = np.flatnonzero(np.r_[True, sign[1:] != sign[:-1]])
    sums = np.add.reduceat(x, starts) * interval_s * KWH_PER_MW_S
    run_sign = sign[starts]
    discharge = float(sums[run_sign > 0].max()) if (run_sign > 0).any() else 0.0
    charge = float(-sums[run_sign < 0].min()) if (run_sign < 0).any() else 0.0
    return discharge, charge


def window_discharge(x: np.ndarray, interval_s: float, window: int) -> float:
    """The largest discharge (x > 0) summed over any ``window`` consecutive samples, in kWh."""
    c = np.concatenate([[0.0], np.cumsum(np.maximum(x, 0.0))])
    sums = c[window:] - c[:-window] if c.size > window else c[-1:]
    return float(sums.max(initial=0.0)) * interval_s * KWH_PER_MW_S


def max_ramp_per_min(p: np.ndarray, interval_s: float) -> float:
    if p.size < 2:
        return 0.0
    return float(np.abs(np.diff(p)).max() / (interval_s / 60.0))


def size_battery(load_mw, interval_s: float, window: int, margin: float = 1.2, ramp_limit: float | None = None,
                 dod: float = 0.9, trailing: bool = False) -> Sizing:
    p = validate(load_mw, interval_s, window, margin, ramp_limit, dod)
    window = int(window)
    target = trailing_target(p, window) if trailing else block_target(p, window)
    batt = p - target
    # exact zeros where the arithmetic leaves a rounding residue on a constant stretch
    batt[np.abs(batt) <= 1e-12 * np.maximum(np.abs(p), 1.0)] = 0.0
    discharge, charge = run_energies(batt, interval_s)
    soc = np.concatenate([[0.0], np.cumsum(batt)]) * interval_s * KWH_PER_MW_S
    swing = float(soc.max() - soc.min())
    in_window = window_discharge(batt, interval_s, window)
    original = max_ramp_per_min(p, interval_s)
    target_ramp = max_ramp_per_min(target, interval_s)
    smoothed = float(ramp_limit) if ramp_limit is not None else target_ramp
    return Sizing(
        power_capacity_mw=float(np.abs(batt).max()) * margin,
        discharge_energy_kwh=discharge,
        charge_energy_kwh=charge,
        soc_swing_kwh=swing,
        window_discharge_kwh=in_window,
        recommended_energy_kwh=max(discharge, in_window, charge, swing) * margin / dod,
        original_max_ramp_mw_per_min=original,
        smoothed_max_ramp_mw_per_min=smoothed,
        smoothing_rate_pct=(1.0 - smoothed / original) * 100.0 if original > 0 else 0.0,
        target_max_ramp_mw_per_min=target_ramp,
        ramp_limit_met=ramp_limit is None or target_ramp <= float(ramp_limit) + 1e-12,
        target_mw=target,
        compensation_mw=batt,
    )


def size_battery_reference(load_mw, interval_s, window, margin=1.2, ramp_limit=None, dod=0.9, trailing=False) -> dict:
    """The same, one sample at a time in plain Python (what tests compare the vectorised one with)."""
    p = [float(v) for v in load_mw]
    n = len(p)
    target = []
    for t in range(n):
        if trailing:
            lo = max(0, t - window + 1)
            seg = p[lo:t + 1]
        else:
            b = (t // window) * window
            seg = p[b:min(b + window, n)]
        target.append(sum(seg) / len(seg))
    batt = [a - b for a, b in zip(p, target, strict=True)]
    batt = [0.0 if abs(x) <= 1e-12 * max(abs(v), 1.0) else x for x, v in zip(batt, p, strict=True)]
    k = interval_s * 1000.0 / 3600.0
    best_d = best_c = run = 0.0
    sign = 0
    soc, lo_soc, hi_soc = 0.0, 0.0, 0.0
    for x in batt:
        s = (x > 0) - (x < 0)
        run = run + x * k if s == sign and s != 0 else x * k
        sign = s
        if s > 0:
            best_d = max(best_d, run)
        elif s < 0:
            best_c = max(best_c, -run)
        soc += x * k
        lo_soc, hi_soc = min(lo_soc, soc), max(hi_soc, soc)
    per_min = interval_s / 60.0
    orig = max((abs(p[i + 1] - p[i]) / per_min for i in range(n - 1)), default=0.0)
    tr = max((abs(target[i + 1] - target[i]) / per_min for i in range(n - 1)), default=0.0)
    sm = ramp_limit if ramp_limit is not None else tr
    swing = hi_soc - lo_soc
    in_window = max((sum(max(x, 0.0) for x in batt[i:i + window]) * k for i in range(max(n - window + 1, 1))),
                    default=0.0)
    return {"power_capacity_mw": max(abs(x) for x in batt) * margin, "discharge_energy_kwh": best_d,
            "charge_energy_kwh": best_c, "soc_swing_kwh": swing, "window_discharge_kwh": in_window,
            "recommended_energy_kwh": max(best_d, in_window, best_c, swing) * margin / dod,
            "original_max_ramp_mw_per_min": orig, "smoothed_max_ramp_mw_per_min": sm,
            "smoothing_rate_pct": (1 - sm / orig) * 100 if orig > 0 else 0.0, "target_mw": target,
            "compensation_mw": batt}
