"""The state agent's scheduling side: tasks in (sched.tasks), decisions and reschedule events out.

A task is decided as soon as it arrives; every CNSCHED_RESCORE_INTERVAL_SECONDS, when the network
view, the inventory or the tasks changed, queued tasks are retried (starving first) and running tasks
re-evaluated for migration. Task records (the task, its status, placement and history) live in the
`tasks` table, so GET /tasks/{id} answers from any worker and a restarted owner picks them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time

import faust
from faust.types import TP

from core.reschedule import ReschedulePolicy
from core.vocabulary import DEFAULT_TYPES
from schemas.sched import Decision, RescheduleEvent, Task, TaskEvent
from streams.analytics.history import StoreError, load_learned_alphas, worst_forecasts
from streams.config import Settings
from streams.kafka import TASKS_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import validated
from streams.worker.scheduling.state import Pending, Running, Scheduler

log = logging.getLogger(__name__)


class TaskBook:
    """Task records in the `tasks` table, written with an explicit partition (0) so the timer can
    write them too."""

    def __init__(self, table) -> None:
        self.table = table

    def get(self, task_id: str) -> dict | None:
        raw = self.table.get(task_id.encode())
        return json.loads(raw) if raw else None

    def all(self) -> list[dict]:
        return [json.loads(v) for v in self.table.values() if v]

    async def put(self, record: dict) -> None:
        key = record["task"]["id"].encode()
        value = json.dumps(record).encode()
        self.table.data[key] = value
        await self.table.changelog_topic.send(key=key, value=value, partition=0)


def register(app: faust.App, topics, settings: Settings, counters: Counters, net, inv) -> TaskBook:
    counters.describe("tasks_total", "tasks received on sched.tasks")
    counters.describe("tasks_rejected_total", "tasks sent to sched.deadletter")
    counters.describe("decisions_total", "decisions sent to sched.decisions, by status")
    counters.describe("reschedules_total", "migrations sent to sched.reschedules, by trigger")
    counters.describe("task_events_total", "task lifecycle events applied from sched.events, by event")
    counters.describe("type_alpha", "the alpha each task type is scored with (learned or default)")
    counters.describe("type_finished_tasks", "finished tasks of each type in the DuckDB history")
    counters.describe("forecast_paths", "paths with a forecast (preventive rescheduling)")
    counters.describe("history_refreshed_unixtime", "when forecasts and learned alphas were last read")
    table = app.Table(table_name(settings, TASKS_TABLE), key_type=bytes, value_type=bytes, partitions=1)
    book = TaskBook(table)
    sched = Scheduler(
        net, inv, margin=settings.resource_margin, max_wait_s=settings.max_wait_seconds,
        node_timeout_s=settings.node_timeout_seconds,
        policy=ReschedulePolicy(cooldown_s=settings.migration_cooldown_seconds),
        conversion=settings.conversion_table,
        benchmark_work=settings.benchmark_table,
        energy_carbon_weight=settings.energy_carbon_weight,
    )
    state = {"restored": False, "scored_version": -1}
    lock = asyncio.Lock()
    net.on_change = sched.touch
    inv.on_change = sched.touch

    def restore() -> None:
        if state["restored"]:
            return
        for rec in book.all():
            task = Task.model_validate(rec["task"])
            r = rec.get("running")
            if rec["status"] == "placed" and r:
                sched.running[task.id] = Running(task, rec["nodes"], r["alpha"], r["profile"], r["placed_at"],
                                                 r["baseline_p95"] if r["baseline_p95"] is not None else float("nan"),
                                                 cooldown_until=r.get("cooldown_until", 0.0), moves=r.get("moves", 0))
            elif rec["status"] == "queued":
                sched.pending[task.id] = Pending(task, task.submitted_at or time.time())
        state["restored"] = True
        log.info("scheduler restored %d running and %d queued tasks", len(sched.running), len(sched.pending))

    def record_of(task_id: str, status: str, nodes: list[str], entry: dict, rec: dict | None = None,
                  task: Task | None = None) -> dict:
        """The task's record with a new status and history entry (``rec``: the record already read)."""
        rec = rec or book.get(task_id) or {"task": task.model_dump(mode="json"), "history": []}
        rec.update(status=status, nodes=nodes)
        run = sched.running.get(task_id)
        rec["running"] = None if run is None else {
            "alpha": run.alpha, "profile": run.profile, "placed_at": run.placed_at,
            "baseline_p95": None if run.baseline_p95 != run.baseline_p95 else run.baseline_p95,
            "cooldown_until": run.cooldown_until, "moves": run.moves}
        rec["history"] = (rec["history"] + [entry])[-50:]
        return rec

    async def publish_decision(task: Task, d: Decision) -> None:
        status = "placed" if d.status == "placed" else "queued"
        await book.put(record_of(task.id, status, d.nodes, {"decision": d.model_dump(mode="json")}, task=task))
        await topics.decisions.send(key=task.id.encode(), value=d.model_dump_json().encode())
        counters.inc("decisions_total", status=d.status)

    async def publish_move(ev: RescheduleEvent) -> None:
        await book.put(record_of(ev.task_id, "placed", ev.to_nodes, {"reschedule": ev.model_dump(mode="json")},
                                 task=sched.running[ev.task_id].task))
        await topics.reschedules.send(key=ev.task_id.encode(), value=ev.model_dump_json().encode())
        counters.inc("reschedules_total", trigger=ev.trigger)

    @app.agent(topics.tasks, name="scheduler")
    async def scheduler_agent(stream):
        async for event in stream.events():
            counters.inc("tasks_total")
            task, _ = await validated(Task, event, topics.sched_deadletter)
            if task is None:
                counters.inc("tasks_rejected_total")
                continue
            async with lock:
                restore()
                if task.submitted_at is None:
                    task = task.model_copy(update={"submitted_at": time.time()})
                done = (book.get(task.id) or {}).get("status") in ("finished", "failed")
                if task.id in sched.running or done:
                    continue  # a redelivered task: decided (or even run) already
                d = sched.decide(task)
                await publish_decision(task, d)

    @app.agent(topics.events, name="task-events")
    async def lifecycle_agent(stream):
        """A finished or failed task releases its nodes; every event joins the task's history."""
        async for event in stream.events():
            ev, _ = await validated(TaskEvent, event, topics.sched_deadletter, "task event: ")
            if ev is None:
                counters.inc("tasks_rejected_total")
                continue
            async with lock:
                restore()
                rec = book.get(ev.task_id)
                if rec is None or rec["status"] in ("finished", "failed"):
                    continue  # not ours, or redelivered after the end
                counters.inc("task_events_total", event=ev.event)
                status = rec["status"]
                if ev.event in ("finished", "failed"):
                    status = ev.event
                    if sched.running.pop(ev.task_id, None) is not None:
                        sched.allocation_version += 1
                        sched.touch()
                    sched.pending.pop(ev.task_id, None)
                await book.put(record_of(ev.task_id, status, rec["nodes"], {"event": ev.model_dump(mode="json")}, rec))

    @app.task
    async def rescorer():
        """Rescore as soon as something changed, at most once per CNSCHED_RESCORE_INTERVAL_SECONDS."""
        changed = asyncio.Event()
        sched.on_touch = changed.set
        last = 0.0
        while True:
            # also look now and then: node timeouts and starving tasks move with the clock
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=settings.rescore_interval_seconds)
            changed.clear()
            wait = last + settings.rescore_interval_seconds - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            last = time.monotonic()
            if TP(topics.tasks.get_topic_name(), 0) not in app.consumer.assignment():
                continue  # another worker owns the scheduler
            async with lock:
                restore()
                if sched.version == state["scored_version"] and not sched.pending:
                    continue
                for d in sched.retry_pending():
                    await publish_decision(sched.running[d.task_id].task, d)
                for ev in sched.reschedule():
                    await publish_move(ev)
                state["scored_version"] = sched.version

    @app.task
    async def history_refresh():
        """Learned alphas and (preventive mode) forecasts from the DuckDB history, now and then."""
        if not (settings.learn_alpha or settings.preventive_reschedule):
            return
        await asyncio.sleep(min(5.0, settings.history_refresh_seconds))
        while True:
            if TP(topics.tasks.get_topic_name(), 0) in app.consumer.assignment():
                try:
                    await refresh_history(sched, settings, counters)
                except StoreError as exc:  # no sink yet, or the file is busy: scheduling goes on
                    log.info("history not refreshed: %s", exc)
            await asyncio.sleep(settings.history_refresh_seconds)

    return book


async def refresh_history(sched: Scheduler, settings: Settings, counters: Counters | None = None) -> None:
    """Apply learned alphas (types with at least CNSCHED_ALPHA_MIN_TASKS finished tasks) and, in
    preventive mode, the worst forecast p95 rtt of every path over CNSCHED_PREVENTIVE_HORIZON_SECONDS."""
    counters = counters or Counters()
    if settings.learn_alpha:
        rows = await asyncio.to_thread(load_learned_alphas, settings.duckdb_path, settings.alpha_min_tasks)
        learned = {r["task_type"]: r["learned_alpha"] for r in rows if r["in_use"] and r["task_type"] in DEFAULT_TYPES}
        types = {t: dataclasses.replace(d, alpha=learned[t]) if t in learned else d for t, d in DEFAULT_TYPES.items()}
        if types != sched.types:
            log.info("type alphas now %s", {t: d.alpha for t, d in types.items()})
            sched.types = types
        finished = {r["task_type"]: r["tasks"] for r in rows}
        for t, d in types.items():
            counters.set("type_alpha", d.alpha, type=t, source="learned" if t in learned else "default")
            counters.set("type_finished_tasks", finished.get(t, 0), type=t)
    if settings.preventive_reschedule:
        step = settings.forecast_step_seconds
        worst = await asyncio.to_thread(worst_forecasts, settings.duckdb_path, "rtt_ms", "p95", step,
                                        max(1, round(settings.preventive_horizon_seconds / step)))
        sched.forecast_p95 = worst
        sched.forecast_version += 1
        sched.touch()
        counters.set("forecast_paths", len(worst))
        log.info("preventive rescheduling: forecasts for %d paths", len(worst))
    counters.set("history_refreshed_unixtime", time.time())
