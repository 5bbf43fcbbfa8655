"""Elastic services: how many replicas a service needs, from its reported utilisation and request
rate and from a forecast of that rate (pure: numbers and arrays in, numbers out).

The controller (:func:`desired_replicas`), one step:

- reactive, as Kubernetes' horizontal autoscaler: ``ceil(ready x utilisation / target)``, unchanged
  while ``|utilisation / target - 1| <= tolerance`` (0.1); with a latency target too, the same rule
  on the reported p95 latency against it, and the larger of the two;
- predictive (pre-scaling): the rate forecast ``lead_s`` ahead over what one replica serves at the
  target, ``ceil(forecast_rate / (per_replica_rate x target))``, where a replica's rate at full load
  is ``rate / (ready x utilisation)`` as measured now. Only ever adds: a forecast never takes
  replicas away that the load needs now;
- within [min, max]; a scale-down only to the highest count wanted over the last
  ``scale_down_delay_s`` (the stabilisation window), so a dip does not drop replicas a minute
  before the load comes back.

The forecast (:func:`forecast_rate`): with at least a day and a lead of history, the rate a day
before the target time scaled by how today compares with yesterday (the last ``level_s`` against
the same span a day earlier, the ratio held within [0.5, 2]); with less, the newest level plus its
least-squares trend over the last ``lead_s``, carried ahead no further than the span it was seen
over (never below zero).

:func:`simulate` runs the controller over a request-rate series: replicas started take ``load_s``
(image pull and model load) to serve, warm standby replicas serve at once when promoted and are
refilled in ``load_s``. It reports what a service owner pays and suffers: replica-hours, and the
share of requests beyond what the ready replicas could serve.

Warm standby sized from the request history (``standby_cover`` q > 0): a replica started now serves
only after its cold start, so what the standby must absorb is the rate's rise within that time. Over
the history kept for the forecast, each sample's rise is the highest rate of the cold start after it
less its own (requests/s: :func:`rise_quantile`); the q-quantile of those is the rise planned for, and
the standby holds the replicas that, promoted, carry the rate plus that rise at full load beside the
serving ones (:func:`standby_for`) — never fewer than ``standby``, never more than the maximum leaves
room for. It falls only to the highest count
wanted over the scale-down delay, as the serving count does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DAY_S = 86_400.0


@dataclass(frozen=True)
class ScalingPolicy:
    min_replicas: int = 1
    max_replicas: int = 8
    target_utilisation: float = 0.6
    target_latency_ms: float = 0.0  # also scale on the reported p95 latency against this (0: not)
    tolerance: float = 0.1
    standby: int = 0  # warm replicas kept loaded beyond the active ones (with standby_cover: the fewest)
    standby_cover: float = 0.0  # size the standby for this quantile of the rises within a cold start (0: fixed)
    lead_s: float = 600.0  # pre-scale for the rate this far ahead (0: reactive only)
    scale_down_delay_s: float = 300.0
    level_s: float = 900.0  # the span today's level is measured over (forecast)


def reactive_replicas(ready: int, utilisation: float, target: float, tolerance: float = 0.1) -> int:
    """Replicas that bring ``utilisation`` (0..1 of the ready replicas' capacity) to ``target``."""
    if ready <= 0 or not math.isfinite(utilisation):
        return max(ready, 0)
    if abs(utilisation / target - 1.0) <= tolerance:
        return ready
    return math.ceil(ready * utilisation / target - 1e-9)


def predictive_replicas(ready: int, utilisation: float, rate: float, forecast: float, target: float) -> int:
    """Replicas that serve the forecast rate at the target, each serving what one serves now at full
    load; 0 when nothing says what a replica serves (no load, no rate, no forecast)."""
    if ready <= 0 or not (utilisation > 0 and rate > 0 and math.isfinite(forecast)):
        return 0
    per_replica = rate / (ready * utilisation)
    return math.ceil(forecast / (per_replica * target) - 1e-9)


def desired_replicas(ready: int, utilisation: float, rate: float, forecast: float, policy: ScalingPolicy,
                     recent: np.ndarray, latency_ms: float = math.nan) -> tuple[int, str, int]:
    """(replicas wanted now, why, the recommendation): reactive and predictive, bounded, scale-down
    stabilised. ``recent``: the recommendations (the third value: reactive and predictive, before
    bounds and stabilisation) of the last ``scale_down_delay_s``, before this one. Why is
    "utilisation", "latency", "forecast", "idle" (fewer), "bounds" (min/max alone) or "" (no change)."""
    react = reactive_replicas(ready, utilisation, policy.target_utilisation, policy.tolerance)
    slow = 0
    if policy.target_latency_ms > 0 and latency_ms > 0:
        slow = reactive_replicas(ready, latency_ms, policy.target_latency_ms, policy.tolerance)
    pre = predictive_replicas(ready, utilisation, rate, forecast, policy.target_utilisation) if policy.lead_s > 0 else 0
    raw = want = max(react, slow, pre)
    if want < ready and len(recent):  # down only as far as the highest count wanted within the window
        want = min(max(want, int(np.max(recent))), ready)
    bounded = min(max(want, policy.min_replicas), policy.max_replicas)
    if bounded == ready:
        return ready, "", raw
    if want == ready or (want > ready) != (bounded > ready):
        return bounded, "bounds", raw  # the bounds alone move it (a new minimum, a lowered maximum)
    if bounded < ready:
        return bounded, "idle", raw
    return bounded, "forecast" if pre > max(react, slow) else "latency" if slow > react else "utilisation", raw


def forecast_rate(t: np.ndarray, rate: np.ndarray, now: float, lead_s: float, level_s: float = 900.0) -> float:
    """The request rate expected ``lead_s`` after ``now`` from the samples (t, rate), oldest first
    (NaN when there is none)."""
    t, rate = np.asarray(t, float), np.asarray(rate, float)
    keep = np.isfinite(t) & np.isfinite(rate) & (t <= now)
    t, rate = t[keep], rate[keep]
    if t.size == 0:
        return math.nan
    if now - t[0] >= DAY_S + lead_s:
        today = rate[t > now - level_s]
        before = rate[(t > now - level_s - DAY_S) & (t <= now - DAY_S)]
        ahead = rate[(t > now + lead_s - DAY_S - level_s / 2) & (t <= now + lead_s - DAY_S + level_s / 2)]
        if today.size and before.size and ahead.size and before.mean() > 0:
            ratio = min(max(today.mean() / before.mean(), 0.5), 2.0)
            return float(ahead.mean() * ratio)
    recent = t > now - max(lead_s, 1.0)
    tr, rr = t[recent], rate[recent]
    if tr.size < 2 or np.ptp(tr) == 0:
        return float(rate[-1])
    slope, intercept = np.polyfit(tr - now, rr, 1)
    # a trend seen over a short span is carried no further than that span
    return float(max(intercept + slope * min(lead_s, float(np.ptp(tr))), 0.0))


def rise_quantile(t: np.ndarray, rate: np.ndarray, horizon_s: float, q: float) -> float:
    """The rate's rise within ``horizon_s`` (requests/s) at the ``q``-quantile over the samples (t, rate),
    oldest first, whose horizon the samples cover: max(rate in (t_i, t_i + horizon_s]) − rate_i, at least
    0; NaN without such a sample."""
    t, rate = np.asarray(t, float), np.asarray(rate, float)
    keep = np.isfinite(t) & np.isfinite(rate)
    t, rate = t[keep], rate[keep]
    if t.size < 2:
        return math.nan
    ends = np.searchsorted(t, t + horizon_s, side="right")
    first = np.arange(t.size) + 1
    ok = (ends > first) & (t + horizon_s <= t[-1])
    if not ok.any():
        return math.nan
    padded = np.append(rate, -np.inf)  # reduceat's last index may be the end
    peaks = np.maximum.reduceat(padded, np.column_stack([first[ok], ends[ok]]).ravel())[::2]
    return float(np.quantile(np.maximum(peaks - rate[ok], 0.0), q, method="inverted_cdf"))


def standby_for(rate: float, per_replica_rate: float, serving: int, rise: float, floor: int, cap: int) -> int:
    """Warm replicas that, promoted, carry ``rate`` + ``rise`` at full load beside the ``serving`` ones,
    within [floor, max(cap, floor)] (``floor`` when the rate, the capacity or the rise is unknown)."""
    if not (math.isfinite(rate) and math.isfinite(rise) and per_replica_rate > 0):
        return floor
    need = math.ceil((rate + rise) / per_replica_rate - serving - 1e-9)
    return min(max(need, floor), max(cap, floor))


@dataclass(frozen=True)
class ServiceRun:
    replicas: np.ndarray  # int64[T] replicas serving at each step (ready)
    wanted: np.ndarray  # int64[T] replicas the controller asked for (ready and loading)
    standby: np.ndarray  # int64[T] warm standby replicas ready
    replica_hours: float  # active and standby, loading included (what is paid for)
    unserved_share: float  # requests beyond the ready replicas' capacity / all requests
    overloaded_share: float  # steps with demand beyond the ready capacity / all steps
    scale_events: int


def _resized(standby: int, refills: list[int], target: int, ready_at: int) -> tuple[int, list[int]]:
    """The warm standby (ready, refilling: the steps they become ready) brought to ``target``: refills
    started (ready at ``ready_at``), or the ones still refilling cancelled first, then ready ones."""
    have = standby + len(refills)
    if target > have:
        return standby, refills + [ready_at] * (target - have)
    cut = min(have - target, len(refills))
    refills = sorted(refills)[:len(refills) - cut]
    return standby - (have - target - cut), refills


def simulate(rate: np.ndarray, step_s: float, per_replica_rate: float, policy: ScalingPolicy,
             load_s: float) -> ServiceRun:
    """Run the controller over ``rate`` (requests/s at each step, NaN: none that step) with replicas
    that serve ``per_replica_rate`` each at full load and take ``load_s`` to start."""
    rate = np.nan_to_num(np.asarray(rate, float), nan=0.0)
    n = rate.size
    delay = max(int(math.ceil(load_s / step_s - 1e-9)), 0)
    window = max(int(round(policy.scale_down_delay_s / step_s)), 0)
    lead = policy.lead_s
    ready, standby = policy.min_replicas, policy.standby
    loading: list[int] = []  # steps at which loading replicas become ready (active)
    refills: list[int] = []  # steps at which standby refills become ready
    out_ready, out_wanted, out_standby = (np.zeros(n, np.int64) for _ in range(3))
    wanted_hist: list[int] = []
    standby_hist: list[int] = []
    history = int((DAY_S + 2 * lead + policy.level_s) / step_s)  # what the worker keeps (services.history_s)
    paid = unserved = 0.0
    overloaded = events = 0
    times = np.arange(n) * step_s
    for i in range(n):
        ready += sum(1 for s in loading if s <= i)
        loading = [s for s in loading if s > i]
        standby += sum(1 for s in refills if s <= i)
        refills = [s for s in refills if s > i]
        cap = ready * per_replica_rate
        util = min(rate[i] / cap, 1.0) if cap > 0 else 1.0
        unserved += max(rate[i] - cap, 0.0) * step_s
        overloaded += rate[i] > cap
        fc = forecast_rate(times[max(0, i - int((DAY_S + 2 * lead) / step_s)):i + 1],
                           rate[max(0, i - int((DAY_S + 2 * lead) / step_s)):i + 1], times[i], lead,
                           policy.level_s) if lead > 0 else math.nan
        current = ready + len(loading)
        recent = np.array(wanted_hist[-window:] if window else [], np.int64)
        want, _, raw = desired_replicas(current, util * ready / current if current else util, rate[i], fc, policy,
                                        recent)
        wanted_hist.append(raw)
        if want > current:
            events += 1
            promoted = min(want - current, standby)
            standby -= promoted
            ready += promoted
            refills += [i + delay] * promoted
            loading += [i + delay] * (want - current - promoted)
        elif want < current:
            events += 1
            drop = current - want
            cancelled = min(drop, len(loading))
            loading = sorted(loading)[:len(loading) - cancelled]
            ready -= drop - cancelled
        if policy.standby_cover > 0:
            lo = max(0, i - history)
            rise = rise_quantile(times[lo:i + 1], rate[lo:i + 1], load_s, policy.standby_cover)
            standby_hist.append(standby_for(rate[i], per_replica_rate, ready + len(loading), rise, policy.standby,
                                            policy.max_replicas - ready - len(loading)))
            standby, refills = _resized(standby, refills, max(standby_hist[-max(window, 1):]), i + delay)
        out_ready[i], out_wanted[i], out_standby[i] = ready, ready + len(loading), standby
        paid += (ready + len(loading) + standby + len(refills)) * step_s
    total = float(rate.sum() * step_s)
    return ServiceRun(out_ready, out_wanted, out_standby, paid / 3600.0,
                      unserved / total if total > 0 else 0.0, overloaded / n if n else 0.0, events)
