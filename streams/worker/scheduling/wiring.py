"""The scheduler's Faust wiring: the `scheduler` agent (sched.tasks), the `task-events` agent
(sched.events: the runners' lifecycle and the operators' commands), the rescoring loop and the
history refresh, each handing its input to :class:`~streams.worker.scheduling.agent.SchedulingService`
(the logic, under one lock). What a service turns away goes to sched.deadletter with the reason."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

import faust
from faust.types import TP

from core.failures import FailureRule
from core.quality import Freshness
from core.reschedule import ReschedulePolicy
from schemas.sched import Task, TaskEvent
from sinks.duckdb_store import StoreError
from streams.config import Settings
from streams.kafka import TASKS_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import dead_letter, guarded, raw_value, validated
from streams.worker.scheduling import gauges, maintenance
from streams.worker.scheduling import service_agent as services
from streams.worker.scheduling.agent import METRICS, UNKNOWN_TASK, SchedulingService
from streams.worker.scheduling.durations import Durations
from streams.worker.scheduling.history import configured_types, refresh_history, seed_detector
from streams.worker.scheduling.maintenance import MaintenanceBook
from streams.worker.scheduling.ramp import RampBook
from streams.worker.scheduling.staging import CopyBook
from streams.worker.scheduling.state import Scheduler
from streams.worker.taskbook import TaskBook

log = logging.getLogger(__name__)


def make_scheduler(settings: Settings, net, inv) -> Scheduler:
    sched = Scheduler(
        net, inv, margin=settings.resource_margin, max_wait_s=settings.max_wait_seconds,
        queue_rule=settings.queue_order, durations=Durations() if settings.run_predictions == "history" else None,
        placement_rule=settings.placement_rule, packing_band=settings.packing_band,
        gang_packing_band=settings.gang_packing_band, gang_closeness=settings.gang_closeness,
        gang_patience=settings.gang_patience, node_timeout_s=settings.node_timeout_seconds,
        failure_rule=FailureRule(settings.failure_min_probes, settings.failure_grace_seconds,
                                 settings.failure_min_observers, settings.failure_max_network_fraction),
        policy=ReschedulePolicy(cooldown_s=settings.migration_cooldown_seconds),
        conversion=settings.conversion_table, benchmark_work=settings.benchmark_table,
        energy_carbon_weight=settings.energy_carbon_weight, preemption=settings.preemption, preemption_priority=settings.preemption_priority,
        compute_scope=settings.compute_normalisation, copies=CopyBook(settings.staging_store, settings.staging_store_gb),
        ramps=RampBook(dict(settings.site_ramp_limits), checkpoint_every_s=settings.checkpoint_interval_seconds),
        freshness=Freshness(settings.path_fresh_seconds, settings.path_stale_seconds),
        maintenance=MaintenanceBook(settings.drain_deadline_seconds),
    )
    sched.types = configured_types(settings)
    return sched


def register(app: faust.App, topics, settings: Settings, counters: Counters, net, inv) -> SchedulingService:
    for name, help_text in (METRICS | services.METRICS).items():
        counters.describe(name, help_text)
    book = TaskBook(app.Table(table_name(settings, TASKS_TABLE), key_type=bytes, value_type=bytes, partitions=1))
    sched = make_scheduler(settings, net, inv)
    service = SchedulingService(sched, book, topics, counters, settings.max_restarts, settings.max_fallbacks,
                                settings.start_timeout_seconds, settings.queue_timeout_seconds,
                                (settings.metrics_nodes_max, settings.metrics_paths_max), settings.max_queued_tasks)
    gauges.describe(counters)
    maintenance.register(app, topics, settings, counters, sched.maintenance, sched.books_changed, inv)
    net.on_change = sched.touch
    inv.on_change = sched.touch

    def owner() -> bool:
        return TP(topics.tasks.get_topic_name(), 0) in app.consumer.assignment()

    @app.agent(topics.tasks, name="scheduler")
    async def scheduler_agent(stream):
        async for event in stream.events():
            counters.inc("tasks_total")
            task, _ = await validated(Task, event, topics.sched_deadletter)
            if task is None:
                counters.inc("tasks_rejected_total")
                continue
            async def step(task=task, event=event):
                why = await service.on_task(task)
                if why is not None:
                    counters.inc("tasks_rejected_total")
                    await topics.sched_deadletter.send(key=event.message.key, value=dead_letter(
                        raw_value(event), event.message, why, service.rejection(task, why)))

            await guarded(event, topics.sched_deadletter, counters, step)

    @app.agent(topics.events, name="task-events")
    async def lifecycle_agent(stream):
        async for event in stream.events():
            ev, _ = await validated(TaskEvent, event, topics.sched_deadletter, "task event: ")
            if ev is None:
                counters.inc("tasks_rejected_total")
                continue
            async def step(ev=ev, event=event):
                why = await service.on_event(ev)
                if why is not None:
                    counters.inc("task_events_unknown_total" if why == UNKNOWN_TASK else "task_events_refused_total")
                    rec = service.book.get(ev.task_id)
                    detail = f"no task {ev.task_id!r} is known" if why == UNKNOWN_TASK else \
                        f"{ev.event} does not apply to a {rec.status if rec else 'unknown'} task"
                    await topics.sched_deadletter.send(key=event.message.key, value=dead_letter(
                        raw_value(event), event.message, why, detail))

            await guarded(event, topics.sched_deadletter, counters, step)

    _timers(app, service, settings, counters, owner)
    return service


def _router(app: faust.App, service: SchedulingService, counters: Counters, owner) -> asyncio.Event:
    """A task that recomputes the services' routing weights soon after the event it returns is set —
    the network view or the inventory changed (issue 54: within 100 ms) —, apart from the rescoring's
    pace; a burst of windows is one look (20 ms)."""
    rerouted = asyncio.Event()
    sched = service.sched

    @app.task
    async def router():
        while True:
            await rerouted.wait()
            at = time.monotonic()
            await asyncio.sleep(0.02)
            rerouted.clear()
            if owner() and sched.services:
                async with service.lock:
                    for svc in list(sched.services.values()):
                        await services.route(service, svc, "window")
                counters.observe("route_lag_seconds", time.monotonic() - at)

    return rerouted


def _timers(app: faust.App, service: SchedulingService, settings: Settings, counters: Counters, owner) -> None:
    sched = service.sched

    rerouted = _router(app, service, counters, owner)  # a change the services' routing weights may follow

    @app.task
    async def rescorer():
        """Rescore as soon as something changed, at most once per CNSCHED_RESCORE_INTERVAL_SECONDS."""
        changed = asyncio.Event()

        def touched() -> None:
            changed.set()
            rerouted.set()

        sched.on_touch = touched
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
            if owner():  # else another worker owns the scheduler
                await service.rescore()
            elif service.gauged_at > -math.inf:  # it moved away: its per-node series are not this worker's to say
                gauges.clear(counters)
                service.gauged_at = -math.inf

    @app.task
    async def history_refresh():
        """The detector's memory from the DuckDB history once; learned alphas, (preventive mode) path
        forecasts and (tidal lending) team demand forecasts now and then."""
        seeded = False
        await asyncio.sleep(min(5.0, settings.history_refresh_seconds))
        while True:
            if owner():
                try:
                    if not seeded:
                        await seed_detector(sched, settings, counters)
                        seeded = True
                    await refresh_history(sched, settings, counters)
                except StoreError as exc:  # no sink yet, or the file is busy: scheduling goes on
                    log.info("history not read: %s", exc)
            await asyncio.sleep(settings.history_refresh_seconds)
