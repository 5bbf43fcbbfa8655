"""Routing weights for elastic services (issue 54; the seeds' 算力路由): for each origin of a service's
requests, the share each serving replica gets, so that requests are answered soonest on the whole
(core/routing.py decides; this module gathers its inputs and builds the ``sched.routes`` message).

Inputs, per service:
- origins: the service's ``scaling.origins`` (name, probe endpoint, share); none: one origin, ``any``,
  with no delay to any replica (routing by load alone);
- delay origin → replica: the measured p95 RTT of the path from the origin's probe endpoint to the
  replica's node (the scheduler's path table, aged like every decision's); not measured: the replica
  gets nothing from that origin (an origin no probe measures to any replica gets nothing at all);
- a replica's capacity: ``scaling.replica_rate``, else learned from the load reports (the reported
  request rate over the replicas' worth of busy work: what one serves at full load), else 1 request/s
  (and the rate assumed half the warm replicas' capacity: ``rate_known`` False); with no requests now,
  the weights are those of a light load (1 % of the capacity: the nearest warm replicas); a replica's
  own load report (its rate over its utilisation) gives its own capacity: a slow or overloaded one
  loses its share;
- warm: the runner reported the replica started (its model is loaded); a cold one gets nothing;
- price: ``cost_sensitivity`` x (100 − the node's energy score) / 100 x ``ENERGY_S`` seconds a request.

Weights are recomputed on every load report, replica change and rescoring pass, and published only
when they changed (:func:`changed`; the service keeps the last one published: ``Service.routes``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from core.routing import MAX_UTIL, split, weights
from schemas.routes import OriginRoutes, ReplicaRoute, Routes
from schemas.sched import Origin

ENERGY_S = 0.1  # at cost sensitivity 1, the dearest replica must answer this much sooner than the cheapest
ANY = Origin(name="any", share=1.0)


def changed(old: Routes | None, new: Routes) -> bool:
    """Whether ``new`` says anything ``old`` did not (weights, replicas, addresses, warmth, overload);
    numbers that only move a little (rates, expected times) do not count."""
    return old is None or _shape(old) != _shape(new)


def _shape(r: Routes) -> tuple:
    return (r.overloaded, tuple((o.origin, tuple((x.replica, x.weight, x.address, x.warm) for x in o.replicas))
                                for o in r.origins))


def routes_for(sched, svc, now: float, trigger: str) -> Routes:
    """The service's routes now (see the module); ``trigger``: what changed (Routes.trigger)."""
    began = time.perf_counter()
    task, sc = svc.task, svc.task.scaling
    replicas = [r for r in svc.replicas if r in sched.running]
    nodes = [sched.running[r].nodes[0] for r in replicas]
    warm = np.array([bool(sched.running[r].started) for r in replicas], bool)
    origins = sc.origins or [ANY]
    view = sched.nodes(now)
    rows = [view.index.get(n, -1) for n in nodes]
    rtt = _delays(sched, view, task, origins, rows)
    ready = max(int(warm.sum()), 1)
    mu, known = _capacity(svc, sc, ready)
    total = svc.request_rate if known else 0.5 * mu * ready
    plan = total if total > 0 else 0.01 * mu * ready  # no requests now: weights for the first ones (light load)
    lam = np.array([plan * o.share for o in origins])
    energy = np.array([view.energy[i] if i >= 0 else 50.0 for i in rows])
    extra = task.cost_sensitivity * (100.0 - energy) / 100.0 * ENERGY_S
    cap = np.array([svc.capacity.get(r, mu) for r in replicas])  # a replica's own reports win
    s = split(rtt / 1000.0, lam, cap, warm, extra, MAX_UTIL)
    w = weights(s.x)
    address = [_address(sched, n, sc.port) for n in nodes]
    out = []
    for o, origin in enumerate(origins):
        share = s.x[o] / lam[o] if lam[o] > 0 else np.zeros(len(replicas))
        out.append(OriginRoutes(
            origin=origin.name, endpoint=origin.probe, request_rate=round(float(lam[o]), 6),
            expected_response_ms=None if not math.isfinite(s.response_s[o]) else round(float(s.response_s[o]) * 1e3, 3),
            replicas=[ReplicaRoute(replica=r, node=nodes[i], address=address[i], weight=int(w[o, i]),
                                   share=round(float(min(max(share[i], 0.0), 1.0)), 6),
                                   rtt_ms=None if not math.isfinite(rtt[o, i]) else round(float(rtt[o, i]), 3),
                                   warm=bool(warm[i])) for i, r in enumerate(replicas)]))
    return Routes(service_id=task.id, computed_at=now, trigger=trigger, version=0, request_rate=round(float(total), 6),
                  capacity_per_replica=mu, rate_known=known, overloaded=s.overloaded, origins=out,
                  compute_ms=round((time.perf_counter() - began) * 1e3, 3))


def _delays(sched, view, task, origins, rows) -> np.ndarray:
    """float64[O, R] p95 RTT ms from each origin's probe endpoint to each replica's node (NaN: not
    measured; the default origin: 0)."""
    out = np.full((len(origins), len(rows)), np.nan)
    if not rows:
        return out
    measured = [o for o, origin in enumerate(origins) if origin is not ANY]
    if len(measured) < len(origins):
        out[[o for o in range(len(origins)) if o not in measured]] = 0.0
    if measured and len(view.ids):
        profile = task.network_profile or sched.types[task.type].profile
        p95 = sched.path_table(view, profile).gather("p95", [origins[o].probe for o in measured], len(view.ids))
        idx = np.array(rows)
        got = np.where(idx >= 0, p95[:, np.maximum(idx, 0)], np.nan)
        out[measured] = got
    return out


def _capacity(svc, sc, ready: int) -> tuple[float, bool]:
    """(requests/s one replica serves at full load, whether the service's rate is known): the given
    one; else the reported rate over the replicas' worth of busy work; else, with a rate but no
    utilisation, as if the ``ready`` replicas were half busy; else 1 (the rate assumed: half of it)."""
    rate, busy = svc.request_rate, svc.busy
    known = math.isfinite(rate) and rate >= 0
    if sc.replica_rate:
        return float(sc.replica_rate), known
    if known and rate > 0:
        return float(rate / busy) if math.isfinite(busy) and busy > 0 else 2.0 * rate / ready, True
    return 1.0, known


def _address(sched, node: str, port: int | None) -> str | None:
    """host:port a replica on ``node`` serves on: the node's reported ``address`` (else its id) and the
    service's port (None without one)."""
    if port is None:
        return None
    rec = sched.inv.get_key(node.encode()) if hasattr(sched.inv, "get_key") else None
    host = (rec or {}).get("address") or node
    return f"{host}:{port}"
