"""The elastic-service replay (`cnsched simulate --services`): a request-rate series served by the
replicas each scaling policy keeps (core.scaling.simulate), side by side.

The series is a trace's submissions per step: ../shared/data's inference request trace (Azure's, the
request-routing replay's: streams/replay/requests.py) covers one hour, too short for days of scaling,
and job submissions are the nearest long real record of demand made by people (diurnal, weekly, bursty).
One replica serves ``per_replica_rate`` requests/s at full load; by default the series' p95 over 8,
so that the busy hours need several replicas.

Policies: ``static-peak`` (always the replicas the p95 rate needs at the target: what is provisioned
without autoscaling), ``reactive`` (the autoscaler rule), ``reactive-standby`` (with one warm
standby), ``predictive`` (pre-scaling on the rate forecast ``load_s`` ahead) and
``predictive-standby``, and ``reactive-equal-cost``: the autoscaler rule aiming at a lower
utilisation, lowered until it pays the replica-hours ``predictive`` pays (within 2 %) — is the
forecast worth more than the same money spent on headroom? The standby sized from the history
(``predictive-standby-sized``: core.scaling's rises within a cold start at the request-weighted
``STANDBY_COVER`` quantile) beside what the same money buys otherwise: ``predictive-standby-fixed``,
the fewest fixed warm replicas that pay at least as much, and ``headroom-equal-sized``, the autoscaler
rule aiming lower until it pays the same. Figures: replica-hours paid, the share of requests beyond the ready
replicas' capacity, the share of steps overloaded, scale events, and the replicas over time.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from core.scaling import ScalingPolicy, ServiceRun, simulate

POLICIES = ("static-peak", "reactive", "reactive-standby", "predictive", "predictive-standby", "reactive-equal-cost",
            "predictive-standby-sized", "predictive-standby-fixed", "headroom-equal-sized")
STANDBY_COVER = 0.95  # the rises a sized standby absorbs: a conventional 95th percentile, not tuned here


def arrival_rate(submit_s: np.ndarray, step_s: float) -> np.ndarray:
    """Arrivals per second in each ``step_s`` from the first to the last submission."""
    s = np.asarray(submit_s, float)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return np.zeros(0)
    return np.bincount(((s - s.min()) // step_s).astype(np.int64)).astype(float) / step_s


def policies(rate: np.ndarray, per_replica_rate: float, load_s: float, step_s: float, max_replicas: int,
             target: float = 0.6) -> dict[str, ScalingPolicy]:
    base = ScalingPolicy(min_replicas=1, max_replicas=max_replicas, target_utilisation=target, lead_s=0.0)
    p95 = float(np.percentile(rate, 95)) if rate.size else 0.0
    peak = min(max(math.ceil(p95 / (per_replica_rate * target)), 1), max_replicas)
    lead = load_s + step_s  # ready when the forecast rate comes
    return {"static-peak": replace(base, min_replicas=peak, max_replicas=peak),
            "reactive": base, "reactive-standby": replace(base, standby=1),
            "predictive": replace(base, lead_s=lead), "predictive-standby": replace(base, lead_s=lead, standby=1),
            "predictive-standby-sized": replace(base, lead_s=lead, standby_cover=STANDBY_COVER)}


def replay_services(rate: np.ndarray, step_s: float, load_s: float, max_replicas: int,
                    per_replica_rate: float | None = None) -> dict:
    """Every policy over ``rate``: {"per_replica_rate", "steps", "policies": {name: figures}}."""
    rate = np.asarray(rate, float)
    if per_replica_rate is None:
        per_replica_rate = max(float(np.percentile(rate, 95)) / 8.0, 1e-9) if rate.size else 1.0
    out = {}
    pols = policies(rate, per_replica_rate, load_s, step_s, max_replicas)
    for name, pol in pols.items():
        out[name] = _figures(simulate(rate, step_s, per_replica_rate, pol, load_s), pol)
    pol, run = equal_cost(rate, step_s, per_replica_rate, pols["reactive"], load_s, out["predictive"]["replica_hours"])
    out["reactive-equal-cost"] = {**_figures(run, pol), "target_utilisation": round(pol.target_utilisation, 4)}
    sized = out["predictive-standby-sized"]["replica_hours"]
    pol, run = fixed_at_least(rate, step_s, per_replica_rate, pols["predictive"], load_s, sized)
    out["predictive-standby-fixed"] = _figures(run, pol)
    pol, run = equal_cost(rate, step_s, per_replica_rate, pols["reactive"], load_s, sized)
    out["headroom-equal-sized"] = {**_figures(run, pol), "target_utilisation": round(pol.target_utilisation, 4)}
    return {"per_replica_rate": per_replica_rate, "steps": int(rate.size), "step_s": step_s, "load_s": load_s,
            "policies": out}


def equal_cost(rate: np.ndarray, step_s: float, per_replica_rate: float, base: ScalingPolicy, load_s: float,
               hours: float, tolerance: float = 0.02) -> tuple[ScalingPolicy, ServiceRun]:
    """``base`` with its target utilisation lowered (bisection over [0.02, its target]) until its
    replica-hours come within ``tolerance`` of ``hours`` — or the nearest it gets."""
    lo, hi = 0.02, base.target_utilisation
    best = None
    for _ in range(20):
        pol = replace(base, target_utilisation=(lo + hi) / 2)
        run = simulate(rate, step_s, per_replica_rate, pol, load_s)
        if best is None or abs(run.replica_hours - hours) < abs(best[1].replica_hours - hours):
            best = (pol, run)
        if abs(run.replica_hours - hours) <= tolerance * max(hours, 1e-9):
            break
        lo, hi = (lo, pol.target_utilisation) if run.replica_hours < hours else (pol.target_utilisation, hi)
    return best


def fixed_at_least(rate: np.ndarray, step_s: float, per_replica_rate: float, base: ScalingPolicy, load_s: float,
                   hours: float) -> tuple[ScalingPolicy, ServiceRun]:
    """``base`` with the fewest fixed warm replicas (1 up to its maximum) whose replica-hours reach
    ``hours`` — or the most it may keep."""
    for k in range(1, base.max_replicas + 1):
        pol = replace(base, standby=k)
        run = simulate(rate, step_s, per_replica_rate, pol, load_s)
        if run.replica_hours >= hours:
            break
    return pol, run


def _figures(run: ServiceRun, pol: ScalingPolicy) -> dict:
    r = run.replicas
    return {"replica_hours": round(run.replica_hours, 1), "unserved_share": round(run.unserved_share, 5),
            "overloaded_share": round(run.overloaded_share, 5), "scale_events": run.scale_events,
            "replicas_mean": round(float(r.mean()), 2) if r.size else 0.0,
            "replicas_max": int(r.max()) if r.size else 0, "standby": pol.standby, "lead_s": pol.lead_s,
            "replicas": r}
