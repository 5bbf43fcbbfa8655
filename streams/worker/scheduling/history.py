"""What the scheduler takes from the DuckDB history: once at start, the degradation detector's memory
of every path; now and then, learned alphas as task-type defaults and (preventive mode) the worst
forecast p95 RTT of every path."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from core.vocabulary import DEFAULT_TYPES
from sinks.duckdb_store import DuckStore
from sinks.queries import service_load
from streams.adapters.network import PathColumns
from streams.analytics.alphas import load_learned_alphas
from streams.analytics.forecasts import stored_p95s, worst_forecasts
from streams.analytics.tidal import tidal_forecasts
from streams.config import Settings
from streams.metrics import Counters
from streams.worker.scheduling.state import Scheduler

log = logging.getLogger(__name__)


def configured_types(settings: Settings, learned: dict[str, float] | None = None) -> dict:
    """The task types' defaults as configured: learned alphas where given, frugal types
    (CNSCHED_FRUGAL_TYPES) scored by economy."""
    learned = learned or {}
    return {t: dataclasses.replace(d, alpha=learned.get(t, d.alpha), learned=t in learned,
                                   frugal=t in settings.frugal_types)
            for t, d in DEFAULT_TYPES.items()}


async def seed_detector(sched: Scheduler, settings: Settings, counters: Counters | None = None) -> int:
    """Fill each path's detector memory (its last window p95s) from the stored windows, so a restarted
    worker detects shifts at once instead of after a baseline's worth of new windows."""
    paths, ends, p95 = await asyncio.to_thread(stored_p95s, settings.duckdb_path, PathColumns.HISTORY,
                                               step_s=settings.detector_step_seconds)
    added = sched.net.seed_history(paths, ends, p95)
    if added:
        sched.touch()
    (counters or Counters()).set("detector_seeded_windows", added)
    log.info("degradation detector: %d stored windows of %d paths", added, len(paths))
    return added


async def seed_services(sched: Scheduler, settings: Settings, now: float | None = None) -> int:
    """Services not seeded yet (created or restored since the last look) get their stored request
    rates, so pre-scaling after a restart forecasts from a day of history at once."""
    fresh = [svc for svc in sched.services.values() if not svc.seeded and svc.policy.lead_s > 0]
    if not fresh:
        return 0
    now = time.time() if now is None else now
    since = now - max(svc.history_s() for svc in fresh)

    def read():
        with DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=5.0) as store:
            return service_load(store.con, [svc.task.id for svc in fresh], since)

    rows = await asyncio.to_thread(read)
    for svc in fresh:
        svc.seed([(t, r) for sid, t, r in rows if sid == svc.task.id])
    log.info("service load history: %d reports of %d services", len(rows), len(fresh))
    return len(rows)


async def refresh_history(sched: Scheduler, settings: Settings, counters: Counters | None = None) -> None:
    """Apply learned alphas (types with at least CNSCHED_ALPHA_MIN_TASKS finished tasks) and, in
    preventive mode, the worst forecast p95 rtt of every path over CNSCHED_PREVENTIVE_HORIZON_SECONDS."""
    counters = counters or Counters()
    if settings.learn_alpha:
        rows = await asyncio.to_thread(load_learned_alphas, settings.duckdb_path, settings.alpha_min_tasks)
        learned = {r["task_type"]: r["learned_alpha"] for r in rows if r["in_use"] and r["task_type"] in DEFAULT_TYPES}
        types = configured_types(settings, learned)
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
    await seed_services(sched, settings)
    tidal = [q.team for q in sched.quotas.set.quotas if q.tidal]
    if tidal:
        sched.tidal_forecast = await asyncio.to_thread(
            tidal_forecasts, settings.duckdb_path, sorted(set(tidal)), settings.forecast_step_seconds,
            settings.tidal_lead_seconds, time.time())
        for team, cards in sched.tidal_forecast.items():
            counters.set("tidal_forecast_cards", cards, team=team)
    counters.set("history_refreshed_unixtime", time.time())
