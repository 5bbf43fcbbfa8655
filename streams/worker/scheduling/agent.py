"""The state agent's scheduling side: tasks in (sched.tasks), decisions and reschedule events out.

A task is decided as soon as it arrives; whenever the network view, the inventory or the tasks
changed (at most every CNSCHED_RESCORE_INTERVAL_SECONDS) queued tasks are retried (starving first)
and running tasks re-evaluated for migration. Task records live in the `tasks` table (TaskBook), so
GET /tasks/{id} answers from any worker and a restarted owner picks them up.

:class:`SchedulingService` holds the logic (one lock around the scheduler); `wiring.register` only
wires Faust agents and timers to it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from schemas.api import ServiceState
from schemas.operations import Incident
from schemas.quota import DEFAULT_TEAM
from schemas.sched import Decision, RescheduleEvent, Task, TaskEvent
from streams.adapters.tasks import need
from streams.metrics import Counters
from streams.worker.scheduling import gauges
from streams.worker.scheduling import service_agent as services
from streams.worker.scheduling.preemption import preempted_decision, tidal_reclaim
from streams.worker.scheduling.services import Service, service_of
from streams.worker.scheduling.state import Pending, Running, Scheduler
from streams.worker.scheduling.view import SchedulerView
from streams.worker.taskbook import (
    ENDED,
    QUEUE_FULL,
    TaskBook,
    refused,
    running_state,
    same_task,
    updated,
)

log = logging.getLogger(__name__)
GAUGE_EVERY_S = 5.0  # per-node and per-path series refreshed at most this often
UNKNOWN_TASK = "unknown_task"
UNKNOWN_TEAM = "unknown_team"
DUPLICATE = "duplicate_task_id"  # a different task under an id already known
IMPOSSIBLE = "impossible_task"  # no node of the cluster could ever take it
NOT_APPLICABLE = "invalid_transition"  # an operator's command the task's status does not allow
COMMANDS = ("cancel", "hold", "release", "priority")

METRICS = {
    "tasks_total": "tasks received on sched.tasks",
    "tasks_rejected_total": "tasks sent to sched.deadletter",
    "decisions_total": "decisions sent to sched.decisions, by status",
    "reschedules_total": "migrations sent to sched.reschedules, by trigger",
    "task_events_total": "task lifecycle events applied from sched.events, by event",
    "task_events_stale_total": "failed, refused or started events about nodes the task no longer holds: not applied",
    "quota_used_cards": "cards a team holds, of any class (quotas set)",
    "quota_guaranteed_cards": "cards a team is guaranteed, of any class",
    "quota_borrowed_cards": "cards a team holds beyond its guarantee (reclaimable by preemption)",
    "queued_tasks": "tasks waiting in the queue, by team (quotas set)",
    "scheduler_tasks": "tasks the scheduler holds, by state (queued; held; starting: placed, not yet started; running)",
    "inventory_nodes": "nodes in the inventory, by state (available or not: silent, failed, drained)",
    "tidal_forecast_cards": "tidal lending: the most cards a lending team is forecast to hold within the lead time",
    "preemptions_total": "running tasks preempted to make room (resumed later from their checkpoint), by team and reason",
    "preemption_card_seconds_lost_total": "cards x seconds of work preempted tasks lost since their last checkpoint, by team",
    "type_alpha": "the alpha each task type is scored with (learned or default)",
    "type_finished_tasks": "finished tasks of each type in the DuckDB history",
    "forecast_paths": "paths with a forecast (preventive rescheduling)",
    "detector_seeded_windows": "stored window p95s the degradation detector started with",
    "history_refreshed_unixtime": "when forecasts and learned alphas were last read",
    "incidents_total": "failures (of nodes, sites, paths) sent to sched.incidents, by scope, cause and status",
    "task_restarts_total": "failed tasks re-queued to resume from their last checkpoint",
    "task_fallbacks_total": "tasks placed again because a node refused them or they failed to start, by reason",
    "incidents_open": "failures not recovered yet, by scope (node, site, path)",
    "queue_starving_tasks": "queued tasks (not held) that starve: waited past CNSCHED_MAX_WAIT_SECONDS (and their predicted run)",
    "queue_oldest_wait_seconds": "how long the longest-waiting queued task (not held) has waited",
    "tasks_expired_total": "queued tasks that waited past CNSCHED_QUEUE_TIMEOUT_SECONDS and left the queue",
    "tasks_time_limit_total": "running tasks cancelled at their time limit (time_limit_s)",
    "task_events_unknown_total": "task events about no known task, sent to sched.deadletter",
    "task_events_refused_total": "operator commands the task's status does not allow, sent to sched.deadletter",
}


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


class SchedulingService:
    def __init__(self, sched: Scheduler, book: TaskBook, topics, counters: Counters, max_restarts: int = 3,
                 max_fallbacks: int = 3, start_timeout_s: float = 0.0, queue_timeout_s: float = 0.0,
                 gauge_limits: tuple[int, int] = (2000, 500), max_queued: int = 100_000) -> None:
        self.sched, self.book, self.topics, self.counters = sched, book, topics, counters
        self.max_restarts, self.max_fallbacks, self.start_timeout_s = max_restarts, max_fallbacks, start_timeout_s
        self.queue_timeout_s, self.max_queued = queue_timeout_s, max_queued
        self.lock = asyncio.Lock()
        self.restored = False
        self.scored_version = -1
        self.retried_key: tuple | None = None  # the capacity the queue was last retried against
        self.view = SchedulerView(sched)  # what the API and the per-node metrics read
        self.gauge_limits, self.gauged_at = gauge_limits, -math.inf

    def restore(self) -> None:
        """Running and queued tasks from the task records (once, after the table recovered)."""
        if self.restored:
            return
        for rec in self.book.all():
            task = Task.model_validate(rec.task)
            r = rec.running
            if task.scaling is not None:  # a service: its replicas are records of their own
                if rec.status not in ENDED:
                    self.sched.services[task.id] = Service.restored(task, rec.service or ServiceState())
            elif rec.status in ("placed", "running") and r:
                base = math.nan if r.baseline_p95 is None else r.baseline_p95
                self.sched.add_running(Running(
                    task, rec.nodes, r.alpha, r.profile, r.placed_at, base, cooldown_until=r.cooldown_until,
                    moves=r.moves, baseline_loss=_nan(r.baseline_loss),
                    seen_window_end=-math.inf if r.seen_window_end is None else r.seen_window_end,
                    checkpoint_at=_nan(r.checkpoint_at), checkpoint_gb=_nan(r.checkpoint_gb), restarts=r.restarts,
                    started=r.started, ran_s=r.ran_s, start_at=r.start_at))
            elif rec.status in ("queued", "held"):
                self.sched.pending[task.id] = Pending(task, task.submitted_at or time.time(), held=rec.status == "held")
            elif rec.status == "cancelled" and rec.nodes and r:  # not confirmed stopped: its cards stay held
                self.sched.ledger.book(task.id, rec.nodes, need(task), r.placed_at)
                self.sched.stopping[task.id] = time.time()
        self.restored, copies = True, self.sched.copies.restore(self.book.all())  # staged data stays put
        log.info("scheduler restored %d running and %d queued tasks, %d staged copies", len(self.sched.running),
                 len(self.sched.pending), copies)

    async def _book(self, task: Task, status: str, nodes: list[str], entry: dict, rec=None) -> None:
        rec = rec if rec is not None else self.book.get(task.id)
        run = running_state(self.sched.running.get(task.id))
        await self.book.put(updated(rec, task, status, nodes, entry, run))

    async def publish_decision(self, task: Task, d: Decision, status: str | None = None, also: dict | None = None) -> None:
        """Book and send a decision (``also``: more of the same history entry, the command that caused it)."""
        await self.publish_preemptions()  # the victims stop before the task that takes their place starts
        status = status or ("placed" if d.status == "placed" else "queued")
        await self._book(task, status, d.nodes, (also or {}) | {"decision": d.model_dump(mode="json")})
        await self.topics.decisions.send(key=task.id.encode(), value=d.model_dump_json().encode())
        self.counters.inc("decisions_total", status=d.status)

    async def publish_preemptions(self) -> None:
        """A `preempted` decision per victim (its record goes back to queued), counted per team."""
        done, self.sched.preemptions = self.sched.preemptions, []
        for p in done:
            task = self.sched.task_of(p.task_id)
            if task is None:
                continue
            d = preempted_decision(p, task, self.sched.version)
            await self._book(task, "queued", [], {"decision": d.model_dump(mode="json")})
            await self.topics.decisions.send(key=task.id.encode(), value=d.model_dump_json().encode())
            self.counters.inc("decisions_total", status="preempted")
            self.counters.inc("preemptions_total", team=p.team or "-", reason=p.reason)
            self.counters.inc("preemption_card_seconds_lost_total", p.card_seconds_lost, team=p.team or "-")
            log.info("preempted %s (%s) for %s: %.0f s of work lost", p.task_id, p.reason, p.by, p.work_lost_s)

    async def publish_move(self, ev: RescheduleEvent) -> None:
        await self._book(self.sched.running[ev.task_id].task, "placed", ev.to_nodes,
                         {"reschedule": ev.model_dump(mode="json")})
        await self.topics.reschedules.send(key=ev.task_id.encode(), value=ev.model_dump_json().encode())
        self.counters.inc("reschedules_total", trigger=ev.trigger)

    async def on_task(self, task: Task) -> str | None:
        """Decide a new task. Returns UNKNOWN_TEAM (its record says rejected) when quotas are set and
        none names its team."""
        arrived = time.monotonic()
        async with self.lock:
            self.restore()
            rec = self.book.get(task.id)
            if refused(rec):
                rec = None  # refused at submission: it took no id; submitted again (fixed or not), it is new
            if rec is not None and not same_task(rec.task, task):
                return DUPLICATE
            if task.submitted_at is None:
                task = task.model_copy(update={"submitted_at": time.time()})
            if task.id in self.sched.running or task.id in self.sched.services or \
                    (rec is not None and rec.status not in ("queued",)):
                return None  # a redelivered task: decided (or even run) already
            if rec is None and (why := self.sched.impossible(task, time.time())) is not None:
                await self._book(task, "rejected", [], {"rejected": {
                    "reason": IMPOSSIBLE, "field": why[0], "detail": why[1]}})
                return IMPOSSIBLE
            if rec is None and len(self.sched.pending) >= self.max_queued:
                await self._book(task, "rejected", [], {"rejected": {
                    "reason": QUEUE_FULL, "field": "body",
                    "detail": f"{len(self.sched.pending)} tasks wait already, the most the queue holds "
                              "(CNSCHED_MAX_QUEUED_TASKS); submit again later"}})
                return QUEUE_FULL
            if self.sched.quotas.team_of(task) is None:
                teams = ", ".join(self.sched.quotas.teams)
                await self._book(task, "rejected", [], {"rejected": {
                    "reason": UNKNOWN_TEAM, "field": "team",
                    "detail": f"no quota names team {task.team or DEFAULT_TEAM!r}; the teams are {teams}"}})
                return UNKNOWN_TEAM
            if task.scaling is not None:
                await services.create(self, task)
            else:
                await self.publish_decision(task, self.sched.decide(task))
            self.counters.observe("decision_seconds", time.monotonic() - arrived)
            return None

    async def on_event(self, ev: TaskEvent) -> str | None:
        """A finished task releases its nodes; a failed one is re-queued to resume from its last checkpoint (failed
        for good after CNSCHED_MAX_RESTARTS); a checkpoint is remembered; a staging's copies are there; every event
        joins the task's history. Returns UNKNOWN_TASK for an event about no task we know."""
        async with self.lock:
            self.restore()
            rec = self.book.get(ev.task_id)
            if rec is None:
                return UNKNOWN_TASK
            entry = {"event": ev.model_dump(mode="json", exclude_none=True)}
            if rec.status == "cancelled" and rec.nodes and ev.event in ("stopped", "finished", "failed"):
                self.sched.stopped(ev.task_id)  # the runner stopped it: its cards are free
                await self._book(Task.model_validate(rec.task), "cancelled", [], entry, rec)
                return None
            if ev.event == "delete":  # an ended task leaves the live view; a live one must end first
                return await self.book.forget(ev.task_id) if rec.status in ENDED else NOT_APPLICABLE
            if rec.status in ENDED:
                return NOT_APPLICABLE if ev.event in COMMANDS else None  # else redelivered after the end
            if ev.task_id in self.sched.services or (ev.event == "load" and service_of(self.sched, ev.task_id)):
                self.counters.inc("task_events_total", event=ev.event)
                return NOT_APPLICABLE if ev.event in COMMANDS else await services.on_event(self, rec, ev)
            if self.sched.stale(ev.task_id, ev.event, ev.nodes):  # applied, it would end the placement it has now
                self.counters.inc("task_events_stale_total", event=ev.event)
                return None
            self.counters.inc("task_events_total", event=ev.event)
            if ev.event in COMMANDS:
                return await self._command(rec, ev, entry)
            if ev.event in ("load", "stopped", "progress", "staged", "loaded"):  # stored only, but steps done (None:
                self.sched.copies.arrived(ev.model_extra.get("staged") if ev.event == "staged" else None, ev.at)
                return self.sched.progress(ev.task_id, ev.steps_done, ev.steps_total)  # no answer) moves read
            status = rec.status
            if ev.event == "started":
                self.sched.start(ev.task_id, ev.nodes, ev.duration_s)
                run = self.sched.running.get(ev.task_id)
                status = "running" if run is not None and run.started else status
            elif ev.event == "refused" or (ev.event == "failed" and not self._started(ev.task_id)):
                await self._fall_back(rec, ev, entry)  # not started there: the next candidate
                return
            elif ev.event == "checkpoint":
                self.sched.checkpoint(ev.task_id, ev.checkpoint_at or ev.at, ev.checkpoint_gb, ev.duration_s)
            elif ev.event == "finished":
                status = "finished"
                self.sched.finished(ev.task_id, ev.at, ev.throughput)
            elif ev.event == "failed":
                lost = self.sched.fail(ev.task_id, ev.at, self.max_restarts)
                status = "failed" if lost is None else "queued"
                if lost is not None:
                    entry["requeued"], entry["work_lost_s"] = True, round(lost, 3)
                    self.counters.inc("task_restarts_total")
            task = Task.model_validate(rec.task)
            await self._book(task, status, [] if status == "queued" else rec.nodes, entry, rec)
            return None

    async def _command(self, rec, ev: TaskEvent, entry: dict) -> str | None:
        """An operator's cancel, hold, release or priority (NOT_APPLICABLE when the task's status does
        not allow it: hold and release are for queued tasks)."""
        task, sched = Task.model_validate(rec.task), self.sched
        if ev.event == "cancel":
            who = ev.by or "an operator"
            d = sched.cancel(ev.task_id, ev.at, f"{who} ({ev.reason})" if ev.reason else who)
            if d is None:
                return NOT_APPLICABLE
            await self.publish_decision(task, d, "cancelled", also=entry)
        elif ev.event == "hold":
            if not sched.hold(ev.task_id):
                return NOT_APPLICABLE
            await self._book(task, "held", [], entry, rec)
        elif ev.event == "release":
            if not sched.release(ev.task_id):
                return NOT_APPLICABLE
            await self._book(task, "queued", [], entry, rec)
        else:
            now = sched.reprioritise(ev.task_id, ev.priority)
            if now is None:
                return NOT_APPLICABLE
            rec = rec.model_copy(update={"task": now.model_dump(mode="json")})
            await self._book(now, rec.status, rec.nodes, entry, rec)
        log.info("%s %s by %s: %s", ev.event, ev.task_id, ev.by or "-", ev.reason or "-")
        return None

    def rejection(self, task: Task, why: str) -> str:
        """The dead letter's detail for a task turned away (``why``: what on_task returned)."""
        if why == UNKNOWN_TEAM:
            return f"no quota names team {task.team or DEFAULT_TEAM!r}"
        if why == DUPLICATE:
            return f"a different task with id {task.id!r} is already known"
        rec = self.book.get(task.id)
        got = rec.history[-1].get("rejected", {}) if rec and rec.history else {}
        return f"{got.get('field', 'task')}: {got.get('detail', 'no node could ever take it')}"

    def _started(self, task_id: str) -> bool:
        return (run := self.sched.running.get(task_id)) is None or run.started

    async def _fall_back(self, rec, ev: TaskEvent, entry: dict) -> None:
        reason = "refused" if ev.event == "refused" else "failed_at_start"
        task = Task.model_validate(rec.task)
        await self._book(task, rec.status, rec.nodes, entry, rec)
        back = self.sched.roll_back(ev.task_id, ev.at)  # a move that did not start: it stays where it was
        if back is not None:
            await self.publish_move(back)
            return
        d = self.sched.refuse(ev.task_id, reason, ev.at, self.max_fallbacks)
        if d is not None:
            self.counters.inc("task_fallbacks_total", reason=reason)
            await self.publish_decision(task, d)

    async def rescore(self) -> None:
        """Watch for failed nodes; retry queued tasks and re-evaluate running ones when anything
        changed or a node is down (its tasks move at once)."""
        async with self.lock:
            began = time.monotonic()
            self.restore()
            incidents = self.sched.watch()
            for out in self.sched.expire_starts(time.time(), self.start_timeout_s, self.max_fallbacks):
                if isinstance(out, RescheduleEvent):
                    await self.publish_move(out)
                    continue
                self.counters.inc("task_fallbacks_total", reason="start_timeout")
                await self.publish_decision(self.sched.task_of(out.task_id), out)
            for task_id in self.sched.expire_stops(time.time(), self.start_timeout_s):
                log.warning("cancelled task %s: no runner confirmed it stopped; its cards are free", task_id)
            for task, d in self.sched.expire_queued(time.time(), self.queue_timeout_s):
                self.counters.inc("tasks_expired_total")
                await self.publish_decision(task, d, "expired")
            for task, d in self.sched.expire_limits(time.time()):
                self.counters.inc("tasks_time_limit_total")
                await self.publish_decision(task, d, "cancelled")
            if self.sched.pending and self.sched.capacity_key() != self.retried_key:
                for d in self.sched.retry_pending():  # only when what is free may have changed
                    await self.publish_decision(self.sched.running[d.task_id].task, d)
                for task, d in self.sched.take_ahead():  # a queued head whose data is copied ahead
                    await self.publish_decision(task, d)
                self.retried_key = self.sched.capacity_key()
            if self.sched.version != self.scored_version or self.sched.incidents.unmitigated():
                for ev in self.sched.reschedule():
                    await self.publish_move(ev)
                for d in self.sched.recover():  # on a failed node with nowhere to move: re-queued
                    await self.publish_decision(self.sched.task_of(d.task_id), d)
                await self.publish_preemptions()  # drains past their deadline: stopped there, re-queued
                incidents += self.sched.watch()  # recovered by these moves
                self.scored_version = self.sched.version
            for inc in incidents:
                await self.publish_incident(inc)
            await services.rescale_all(self, time.time())
            if tidal_reclaim(self.sched, time.time()):
                await self.publish_preemptions()
            gauges.quotas(self.counters, self.sched)
            self.state_gauges()
            if time.monotonic() - self.gauged_at >= GAUGE_EVERY_S:
                self.gauged_at = time.monotonic()
                gauges.publish(self.counters, self.view, time.time(), self.gauge_limits[0], self.gauge_limits[1])
            self.counters.observe("rescore_seconds", time.monotonic() - began)

    def state_gauges(self) -> None:
        """Tasks by state and nodes by availability, as the scheduler holds them now."""
        started = sum(run.started for run in self.sched.running.values())
        self.counters.set("scheduler_tasks", sum(not p.held for p in self.sched.pending.values()), state="queued")
        self.counters.set("scheduler_tasks", len(self.sched.running) - started, state="starting")
        self.counters.set("scheduler_tasks", started, state="running")
        now = time.time()
        waits = [now - p.submitted_at for p in self.sched.pending.values() if not p.held]  # as the queue counts
        self.counters.set("queue_starving_tasks", self.sched.starving_now(now))
        self.counters.set("queue_oldest_wait_seconds", max(waits, default=0.0))
        self.counters.set("scheduler_tasks", sum(p.held for p in self.sched.pending.values()), state="held")
        available = self.sched.nodes(now).available
        self.counters.set("inventory_nodes", int(available.sum()), state="available")
        self.counters.set("inventory_nodes", int(available.size - available.sum()), state="unavailable")

    async def publish_incident(self, inc: Incident) -> None:
        await self.topics.incidents.send(key=inc.node.encode(), value=inc.model_dump_json().encode())
        self.counters.inc("incidents_total", scope=inc.scope, cause=inc.cause, status=inc.status)
        self.counters.set("incidents_open", self.sched.incidents.count(inc.scope), scope=inc.scope)
        log.warning("incident on %s: %s (%s), tasks %s", inc.node, inc.status, inc.cause, ",".join(inc.tasks) or "-")
