"""The scheduling service's side of elastic services (scheduling.services): a service task creates
its replicas, ``load`` events and every rescoring pass scale them, and each change is published — the
new replicas' decisions under their own ids, then the service's ``scaled`` decision; stopped replicas'
records end as finished. Called by agent.SchedulingService under its lock."""

from __future__ import annotations

import logging
import time

from schemas.sched import ScalingChange, Task, TaskEvent
from streams.worker.scheduling.routing import changed, routes_for
from streams.worker.scheduling.services import (
    Scaled,
    Service,
    end_service,
    evaluate,
    scaled_decision,
    service_of,
    serving_nodes,
)
from streams.worker.taskbook import ENDED, updated

log = logging.getLogger(__name__)

METRICS = {
    "scaling_decisions_total": "scaled services' replica changes sent to sched.decisions, by reason",
    "service_replicas": "a scaled service's replicas, by role (serving, standby)",
    "service_load_reports_total": "load events applied to scaled services",
    "routes_published_total": "services' routing weights sent to sched.routes (changed ones only), by trigger",
}


async def create(owner, task: Task) -> None:
    """A new service: its minimum replicas and standby placed."""
    svc = Service(task)
    owner.sched.services[task.id] = svc
    scaled = evaluate(owner.sched, svc, time.time(), reason="created")
    if scaled.change is None:  # nothing wanted yet (a minimum of 0 and no standby): said all the same
        scaled.change = ScalingChange(from_replicas=0, to_replicas=0, reason="created")
    await publish(owner, svc, scaled)
    await route(owner, svc, "scaled")


async def on_event(owner, rec, ev: TaskEvent) -> None:
    """A service's event: load scales it; finished or failed ends it and its replicas. A replica's own
    load report reweighs the routes (its capacity)."""
    svc = service_of(owner.sched, ev.task_id)
    if svc is None:
        return
    if ev.task_id != svc.task.id:
        owner.counters.inc("service_load_reports_total")
        if svc.remember_replica(ev):
            await route(owner, svc, "load")
        return
    if ev.event == "load":
        owner.counters.inc("service_load_reports_total")
        svc.remember(ev, len(svc.replicas))
        await publish(owner, svc, evaluate(owner.sched, svc, ev.at))
        await route(owner, svc, "load")
        return
    entry = {"event": ev.model_dump(mode="json", exclude_none=True)}
    if ev.event in ("finished", "failed"):
        before = len(svc.replicas)
        gone = end_service(owner.sched, svc)
        await _stop(owner, gone, svc.task.id)
        del owner.sched.services[svc.task.id]
        await owner.book.put(_record(owner, rec, svc, ev.event, entry))
        await _send(owner, scaled_decision(owner.sched, svc, ScalingChange(
            from_replicas=before, to_replicas=0, reason="ended", removed=gone), ev.at))
        return
    await owner.book.put(_record(owner, rec, svc, rec.status, entry))


async def rescale_all(owner, now: float) -> None:
    """Every service looked at again: pre-scaling on its forecast, replicas that ended replaced."""
    for svc in list(owner.sched.services.values()):
        scaled = evaluate(owner.sched, svc, now)
        await publish(owner, svc, scaled)
        if scaled.change is not None:  # the network's changes are the router's (wiring.py)
            await route(owner, svc, "scaled", now)


async def publish(owner, svc: Service, scaled: Scaled) -> None:
    """New replicas' decisions, stopped replicas' records, then the service's decision and record."""
    for d in scaled.decisions:
        await owner.publish_decision(owner.sched.task_of(d.task_id), d)
    await _stop(owner, scaled.removed, svc.task.id)
    owner.counters.set("service_replicas", len(svc.replicas), service=svc.task.id, role="serving")
    owner.counters.set("service_replicas", len(svc.standby), service=svc.task.id, role="standby")
    if scaled.change is None:
        rec = owner.book.get(svc.task.id)  # its replicas may have been placed or moved since
        if rec is not None and rec.status not in ENDED and serving_nodes(owner.sched, svc) != rec.nodes:
            await owner.book.put(_record(owner, rec, svc, None, None))
        return
    d = scaled_decision(owner.sched, svc, scaled.change, time.time())
    await owner.book.put(_record(owner, owner.book.get(svc.task.id), svc, None, {"decision": d.model_dump(mode="json")}))
    await _send(owner, d)


async def _send(owner, d) -> None:
    """A service's scaled decision to sched.decisions, counted and logged."""
    await owner.topics.decisions.send(key=d.task_id.encode(), value=d.model_dump_json().encode())
    owner.counters.inc("decisions_total", status="scaled")
    owner.counters.inc("scaling_decisions_total", reason=d.scaling.reason)
    log.info("service %s: %d -> %d replicas (%s)", d.task_id, d.scaling.from_replicas, d.scaling.to_replicas,
             d.scaling.reason)


def _record(owner, rec, svc: Service, status: str | None, entry: dict | None):
    if status is None:  # placed once a serving replica is
        status = "placed" if any(r in owner.sched.running for r in svc.replicas) else "queued"
    return updated(rec, svc.task, status, serving_nodes(owner.sched, svc), entry, None, svc.state())


async def _stop(owner, replicas: list[str], service_id: str) -> None:
    """Replicas the service no longer has: their records end as finished."""
    for r in replicas:
        rec = owner.book.get(r)
        if rec is not None and rec.status not in ENDED:
            await owner.book.put(updated(rec, None, "finished", [], {"stopped": {"service": service_id}}, None))


async def route(owner, svc: Service, trigger: str, now: float | None = None) -> None:
    """The service's routing weights again (routing.py); published on sched.routes when they changed."""
    r = routes_for(owner.sched, svc, time.time() if now is None else now, trigger)
    owner.counters.observe("route_seconds", r.compute_ms / 1e3)
    if not changed(svc.routes, r):
        return
    svc.routes = r.model_copy(update={"version": 0 if svc.routes is None else svc.routes.version + 1})
    await owner.topics.routes.send(key=svc.task.id.encode(), value=svc.routes.model_dump_json().encode())
    owner.counters.inc("routes_published_total", trigger=trigger)
