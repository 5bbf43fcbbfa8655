"""Elastic services: a task with ``scaling`` is a template; its replicas are tasks of their own
(``<id>.r<k>``), each decided like any task (filter, score, rank, reserve; their load time —
image, model, data — in the composite), booked and reported on by the runner under its own id.

The service's replica count comes from core.scaling: from ``load`` events (utilisation and request
rate under the service's id) and, on every rescoring pass, from the rate forecast ``prescale_lead_s``
ahead. The load is kept as the work it is (utilisation x the replicas it was measured over; latency
likewise), so looking again with more replicas does not scale again on the same report. Warm standby replicas are
placed and loaded like the others and serve at once when promoted; the standby is refilled at once.
A replica that ends (failed for good, finished, withdrawn) is replaced on the next look.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from core.scaling import (
    DAY_S,
    ScalingPolicy,
    desired_replicas,
    forecast_rate,
    rise_quantile,
    standby_for,
)
from schemas.api import ServiceState
from schemas.routes import Routes
from schemas.sched import Constraints, Decision, Endpoint, ScalingChange, Task, TaskEvent


def policy_of(task: Task) -> ScalingPolicy:
    s = task.scaling
    return ScalingPolicy(min_replicas=s.min_replicas, max_replicas=s.max_replicas,
                         target_utilisation=s.target_utilisation, target_latency_ms=s.target_latency_ms or 0.0,
                         standby=s.standby, standby_cover=s.standby_cover or 0.0, lead_s=s.prescale_lead_s,
                         scale_down_delay_s=s.scale_down_delay_s)


@dataclass
class Service:
    task: Task  # the template (``scaling`` set)
    replicas: list[str] = field(default_factory=list)  # task ids that serve
    standby: list[str] = field(default_factory=list)  # task ids loaded, not serving
    next_index: int = 0
    busy: float = math.nan  # replicas' worth of work at the last report
    request_rate: float = math.nan
    slow: float = math.nan  # the last reported p95 latency x the replicas it was measured over
    reported_at: float = math.nan
    recent: deque = field(default_factory=deque)  # (time, recommendation) within the scale-down delay
    recent_standby: deque = field(default_factory=deque)  # (time, sized standby) within the scale-down delay
    load: deque = field(default_factory=deque)  # (time, request rate) for the forecast
    seeded: bool = False  # its stored load history was read (after a restart)
    _forecast: tuple = (None, math.nan)  # (the reports and second it was made for, the forecast)
    _rise: tuple = (None, math.nan)  # (the reports it was seen over, the covered rise: standby_wanted)
    routes: Routes | None = None  # the routing weights last published (sched.routes; routing.py)
    capacity: dict = field(default_factory=dict)  # replica -> requests/s at full load, from its own load reports

    @property
    def policy(self) -> ScalingPolicy:
        return policy_of(self.task)

    def state(self) -> ServiceState:
        def known(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return ServiceState(replicas=self.replicas, standby=self.standby, next_index=self.next_index,
                            busy=known(self.busy), slow=known(self.slow), request_rate=known(self.request_rate),
                            reported_at=known(self.reported_at), recent=[list(r) for r in self.recent])

    @classmethod
    def restored(cls, task: Task, st: ServiceState) -> Service:
        def nan_if_none(v: float | None) -> float:
            return math.nan if v is None else v

        return cls(task, list(st.replicas), list(st.standby), st.next_index, nan_if_none(st.busy),
                   nan_if_none(st.request_rate), nan_if_none(st.slow), nan_if_none(st.reported_at),
                   deque(tuple(r) for r in st.recent))

    def forecast(self, now: float) -> float:
        """The request rate forecast at the lead time (NaN without reports or a lead)."""
        p = self.policy
        if p.lead_s <= 0 or not self.load:
            return math.nan
        key = (len(self.load), self.load[-1][0], int(now))  # once per new report and second
        if self._forecast[0] != key:
            t, r = np.array(self.load).T
            self._forecast = (key, forecast_rate(t, r, now, p.lead_s, p.level_s))
        return self._forecast[1]

    def standby_wanted(self, now: float, serving: int) -> int:
        """The warm replicas to keep: ``scaling.standby``, or with ``standby_cover`` the replicas that
        carry the rate risen by the covered rise within a cold start beside ``serving`` ones (each
        replica's full-load rate: ``replica_rate``, else the load reports'), falling only to the most
        wanted over the scale-down delay."""
        p, sc = self.policy, self.task.scaling
        if p.standby_cover <= 0:
            return p.standby
        key = (len(self.load), self.load[-1][0] if self.load else None, sc.cold_start_s, p.standby_cover)
        if self._rise[0] != key:  # once per new report (every look at a service asks)
            t, r = np.array(self.load).T if self.load else (np.zeros(0), np.zeros(0))
            self._rise = (key, rise_quantile(t, r, sc.cold_start_s, p.standby_cover))
        rise = self._rise[1]
        per = sc.replica_rate or (self.request_rate / self.busy if self.busy > 0 else math.nan)
        want = standby_for(self.request_rate, per, serving, rise, p.standby, p.max_replicas - serving)
        while self.recent_standby and self.recent_standby[0][0] < now - p.scale_down_delay_s:
            self.recent_standby.popleft()
        self.recent_standby.append((now, want))
        return max(w for _, w in self.recent_standby)

    def history_s(self) -> float:
        """How much rate history the forecast reads: a day and two leads and a level."""
        return DAY_S + 2 * self.policy.lead_s + self.policy.level_s

    def seed(self, rows: list[tuple[float, float]]) -> None:
        """Stored (time, rate) reports joined with the ones kept, each time once, oldest first."""
        merged = dict(rows)
        merged.update(dict(self.load))
        self.load = deque(sorted(merged.items()))
        self.seeded = True

    def remember(self, ev: TaskEvent, replicas: int) -> None:
        """A load report: the work it says is being done, and the rate for the forecast."""
        over = ev.replicas if ev.replicas is not None else max(replicas, 1)
        if ev.utilisation is not None:
            self.busy = ev.utilisation * over
        if ev.latency_ms is not None:  # as the autoscaler assumes: latency falls as replicas are added
            self.slow = ev.latency_ms * over
        if ev.request_rate is not None:
            self.request_rate = ev.request_rate
            self.load.append((ev.at, ev.request_rate))
            while self.load and self.load[0][0] < ev.at - self.history_s():
                self.load.popleft()
        self.reported_at = ev.at

    def remember_replica(self, ev: TaskEvent) -> bool:
        """A replica's own load report: what it serves at full load (its rate over its utilisation), which
        routing weighs it by (a slow or overloaded replica loses its share); whether it said that."""
        if ev.request_rate is None or not ev.utilisation or ev.request_rate <= 0:
            return False
        self.capacity[ev.task_id] = ev.request_rate / ev.utilisation
        return True


def service_of(sched, task_id: str) -> Service | None:
    """The service ``task_id`` is, or is a live replica of (``<service>.r<k>``), or None."""
    svc = sched.services.get(task_id)
    if svc is not None:
        return svc
    base, sep, k = task_id.rpartition(".r")
    svc = sched.services.get(base) if sep and k.isdigit() else None
    return svc if svc is not None and task_id in (*svc.replicas, *svc.standby) else None


@dataclass
class Scaled:
    """What one look at a service did: the change (None: nothing), the new replicas' decisions."""

    change: ScalingChange | None
    decisions: list[Decision]
    removed: list[str]


def replica(sched, svc: Service, now: float, made: list[Task] = ()) -> Task:
    """A new replica's task; with origins, it serves the one its replicas cover least (``users``;
    ``made``: replicas made in this pass, not yet the scheduler's)."""
    rid = f"{svc.task.id}.r{svc.next_index}"
    svc.next_index += 1
    base = svc.task.constraints or Constraints()
    spread = base.model_copy(update={"group": svc.task.id, "spread": svc.task.scaling.spread or base.spread})
    users = _least_served(sched, svc, made)
    return svc.task.model_copy(update={"id": rid, "scaling": None, "submitted_at": now, "constraints": spread,
                                       "users": None if users is None else Endpoint(node=users, size_gb=0.0)})


def _least_served(sched, svc: Service, made: list[Task]) -> str | None:
    """The probe endpoint of the origin whose share per replica serving it (serving or standby, this
    one counted) is the largest — D'Hondt's apportionment of replicas to origins by share — or None."""
    origins = svc.task.scaling.origins
    if not origins:
        return None
    mine = {t.id: t for t in made}
    held = [mine.get(r) or sched.task_of(r) for r in (*svc.replicas, *svc.standby)]
    count = {o.probe: 0 for o in origins}
    for t in held:
        if t is not None and t.users is not None and t.users.node in count:
            count[t.users.node] += 1
    return max(origins, key=lambda o: o.share / (count[o.probe] + 1)).probe


def evaluate(sched, svc: Service, now: float, reason: str = "") -> Scaled:
    """Look at a service: replace replicas that ended, then scale to what its load and forecast want
    (``reason`` forces a change's reason: "created")."""
    alive = set(sched.running) | set(sched.pending)
    had = len(svc.replicas)  # what it is meant to serve with, replicas lost included
    lost = [r for r in svc.replicas + svc.standby if r not in alive]
    svc.replicas = [r for r in svc.replicas if r in alive]
    svc.standby = [r for r in svc.standby if r in alive]
    p = svc.policy
    while svc.recent and svc.recent[0][0] < now - p.scale_down_delay_s:
        svc.recent.popleft()
    fc = svc.forecast(now)
    if (math.isfinite(svc.busy) or math.isfinite(svc.slow)) and had > 0:
        want, why, raw = desired_replicas(had, svc.busy / had, svc.request_rate, fc, p,
                                          np.array([r for _, r in svc.recent], np.int64), svc.slow / had)
        svc.recent.append((now, raw))
    else:  # no load known: within the bounds
        want = min(max(had, p.min_replicas), p.max_replicas)
        why = "bounds" if want != had else ""
    return scale_to(sched, svc, want, reason or why or ("replaced" if lost else ""), now, fc, had)


def scale_to(sched, svc: Service, want: int, reason: str, now: float, fc: float, before: int) -> Scaled:
    """Promote standby replicas, place new ones, stop surplus ones (queued first, then the newest),
    and refill the standby."""
    promoted, removed, new = [], [], []
    if want > len(svc.replicas):
        promoted = svc.standby[:want - len(svc.replicas)]
        svc.standby = svc.standby[len(promoted):]
        svc.replicas += promoted
        new = []
        for _ in range(want - len(svc.replicas)):  # one by one: each counts where the ones before serve
            new.append(replica(sched, svc, now, new))
            svc.replicas.append(new[-1].id)
    elif want < len(svc.replicas):
        removed = _surplus(sched, svc.replicas, len(svc.replicas) - want)
        svc.replicas = [r for r in svc.replicas if r not in removed]
    keep = svc.standby_wanted(now, len(svc.replicas))
    if keep < len(svc.standby):
        cut = _surplus(sched, svc.standby, len(svc.standby) - keep)
        svc.standby = [r for r in svc.standby if r not in cut]
        removed += cut
    spare = []
    for _ in range(keep - len(svc.standby)):
        spare.append(replica(sched, svc, now, new + spare))
        svc.standby.append(spare[-1].id)
    new += spare
    for r in removed:
        sched.end(r)
    decisions = sched.decide_many(new, now) if new else []
    if not (new or removed or promoted):
        return Scaled(None, [], [])
    change = ScalingChange(
        from_replicas=before, to_replicas=len(svc.replicas), reason=reason or "standby",
        utilisation=svc.busy / before if math.isfinite(svc.busy) and before else None,
        request_rate=svc.request_rate if math.isfinite(svc.request_rate) else None,
        forecast_rate=round(fc, 6) if math.isfinite(fc) else None, replicas=list(svc.replicas),
        standby=list(svc.standby), added=[t.id for t in new], removed=removed, promoted=promoted)
    return Scaled(change, decisions, removed)


def _surplus(sched, ids: list[str], n: int) -> list[str]:
    """The ``n`` of ``ids`` to stop: queued ones first, then the newest."""
    return sorted(ids, key=lambda r: (r in sched.running, -ids.index(r)))[:n]


def end_service(sched, svc: Service) -> list[str]:
    """The service ended: every replica stops (their ids)."""
    gone = svc.replicas + svc.standby
    for r in gone:
        sched.end(r)
    svc.replicas, svc.standby = [], []
    return gone


def serving_nodes(sched, svc: Service) -> list[str]:
    """Where the service's serving replicas run (queued ones run nowhere yet)."""
    return [n for r in svc.replicas if r in sched.running for n in sched.running[r].nodes]


def scaled_decision(sched, svc: Service, change: ScalingChange, now: float) -> Decision:
    """The service's own decision: where its serving replicas run, and what changed."""
    task = svc.task
    nodes = serving_nodes(sched, svc)
    profile = task.network_profile or sched.types[task.type].profile
    alpha = task.alpha if task.alpha is not None else sched.types[task.type].alpha
    return Decision(task_id=task.id, status="scaled", nodes=nodes, alpha=alpha, network_profile=profile,
                    state_version=sched.version, decided_at=now, task_type=task.type,
                    submitted_at=task.submitted_at, cards=task.resources.cards, team=task.team, scaling=change)
