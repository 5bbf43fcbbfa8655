"""`cnsched sink`: the single DuckDB writer. Consumes netstate.windows, compute.nodes, sched.decisions,
sched.reschedules and sched.events (task lifecycle) in batches, writes each batch through Arrow, commits offsets only after the write
(at-least-once; the store is idempotent).

Every message is checked against its contract (schemas/) before it is stored — the same models the
worker applies — and what is stored is the validated record (``"5"`` read as 5, as the worker reads
it); window results by Arrow's typed JSON reader in bulk, a message it refuses by its contract. A
message that fails is not stored: it goes to ``sink_rejects`` (topic, partition, offset, reason,
detail, the first CNSCHED_SINK_REJECT_BYTES of the original and its size), kept within
CNSCHED_SINK_REJECTS_MAX_ROWS and CNSCHED_SINK_REJECTS_MAX_AGE_DAYS, and the sink moves on.

The file is open only while a batch is written, so `cnsched sql` (and any DuckDB client) can read it
between batches while the pipeline runs; each side waits briefly while the other holds it."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import signal
import time
from pathlib import Path

import duckdb
import pyarrow as pa
from pydantic import BaseModel, ValidationError

from schemas.api import field_errors
from schemas.compute import ComputeReport
from schemas.operations import Incident, NodeCommand
from schemas.quota import QuotaSet
from schemas.routes import Routes
from schemas.sched import Decision, RescheduleEvent, TaskEvent
from schemas.topics import (
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    SCHED_DECISIONS,
    SCHED_EVENTS,
    SCHED_INCIDENTS,
    SCHED_MAINTENANCE,
    SCHED_QUOTAS,
    SCHED_RESCHEDULES,
    SCHED_ROUTES,
)
from sinks.duckdb_store import DuckStore
from sinks.retention import Retention, compact, copy_due, copy_fresh
from streams.config import Settings
from streams.kafka import consumer

log = logging.getLogger(__name__)
_BAD_ROW = (KeyError, TypeError, ValueError, duckdb.Error, pa.ArrowException)
_MAX_BATCH = 400_000  # window results held while a write runs (~100 MB)
PROGRESS_EVERY_S = 60.0  # a line in the sink's log this often
# the low-rate topics and the DuckStore method that stores each (window results go in bulk)
WRITERS = {SCHED_DECISIONS: "write_decisions", SCHED_RESCHEDULES: "write_reschedules",
           SCHED_EVENTS: "write_task_events", COMPUTE_NODES: "write_compute_reports",
           SCHED_INCIDENTS: "write_incidents", SCHED_QUOTAS: "write_quota_changes",
           SCHED_MAINTENANCE: "write_maintenance", SCHED_ROUTES: "write_routes"}
CONTRACTS: dict[str, type[BaseModel]] = {
    SCHED_DECISIONS: Decision, SCHED_RESCHEDULES: RescheduleEvent, SCHED_EVENTS: TaskEvent,
    COMPUTE_NODES: ComputeReport, SCHED_INCIDENTS: Incident, SCHED_QUOTAS: QuotaSet,
    SCHED_MAINTENANCE: NodeCommand, SCHED_ROUTES: Routes}


def reject(msg, reason: str, detail: str, keep_bytes: int = 8192) -> dict:
    """A ``sink_rejects`` row for a message the sink will not store: its first ``keep_bytes`` bytes
    and its size (a flood of big hostile messages must not grow the sink or its file without bound)."""
    value = msg.value or b""
    return {"topic": msg.topic, "part": msg.partition, "offset": msg.offset, "reason": reason,
            "detail": detail[:2000], "original": bytes(value[:keep_bytes]), "rejected_at": time.time(),
            "original_size": len(value)}


def checked(msg, model: type[BaseModel], keep_bytes: int = 8192) -> tuple[dict | None, dict | None]:
    """(the validated record, None) when the message keeps its contract, else (None, its reject row)."""
    try:
        return model.model_validate_json(msg.value or b"").model_dump(mode="json", by_alias=True,
                                                                         exclude_unset=True), None
    except ValidationError as exc:
        errors = field_errors(exc)
        reason = "undecodable" if any(e["type"] == "json_invalid" for e in exc.errors()) else "schema"
        return None, reject(msg, reason, json.dumps(errors[:20]), keep_bytes)
    except (ValueError, TypeError, RecursionError) as exc:
        return None, reject(msg, "undecodable", f"{type(exc).__name__}: {exc}", keep_bytes)


class WindowSink:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.messages = 0  # read from Kafka, duplicates and bad ones included
        self.stored = 0  # new rows in DuckDB (window results, decisions, migrations)
        self.skipped = 0  # not stored (each one a row of sink_rejects)
        self.first_batch_at: float | None = None  # perf_counter of the first non-empty batch
        self.compacted_at = -math.inf  # monotonic time of the last retention pass (sinks/retention.py)
        self.copied_bytes: int | None = None  # the file's size after the last fresh copy
        self.stop = asyncio.Event()

    async def run(self) -> int:
        DuckStore.open(self.settings.duckdb_path).close()  # create and migrate up front
        windows_topic = self.settings.topic(NETSTATE_WINDOWS)
        names = {self.settings.topic(t): method for t, method in WRITERS.items()}
        models = {self.settings.topic(t): model for t, model in CONTRACTS.items()}
        c = consumer(self.settings, NETSTATE_WINDOWS, *WRITERS,
                     group_id=f"{self.settings.app_id}-duckdb-sink",
                     enable_auto_commit=False, max_poll_records=200_000,
                     max_partition_fetch_bytes=32 << 20, fetch_max_bytes=64 << 20)
        await c.start()
        writing: asyncio.Task | None = None
        # what was read since the last write started: while a write runs, reading goes on and
        # accumulates, so batches grow when the store is the slower side (fewer opens and commits)
        rows: dict[str, list[tuple[dict, object]]] = {}  # per topic: (document, its message)
        raw_windows: list = []  # the window-result messages themselves
        rejects: list[dict] = []
        offsets: dict = {}
        said = (time.monotonic(), self.messages, self.stored, self.skipped)  # what the last progress line said
        log.info("sink: reading %d topics into %s", 1 + len(WRITERS), self.settings.duckdb_path)
        try:
            while not self.stop.is_set():
                if time.monotonic() - said[0] >= PROGRESS_EVERY_S:
                    said = self._progress(said)
                busy = writing is not None and not writing.done()
                batches = await c.getmany(timeout_ms=50 if busy else 500, max_records=200_000)
                if batches and self.first_batch_at is None:
                    self.first_batch_at = time.perf_counter()
                for tp, msgs in batches.items():
                    if not msgs:
                        continue
                    self.messages += len(msgs)
                    offsets[tp] = msgs[-1].offset + 1
                    if tp.topic == windows_topic:  # the high-rate topic: parsed by Arrow in bulk
                        raw_windows += msgs
                        continue
                    for m in msgs:
                        doc, bad = checked(m, models[tp.topic], self.settings.sink_reject_bytes)
                        if doc is not None:
                            rows.setdefault(tp.topic, []).append((doc, m))
                        else:
                            rejects.append(bad)
                if writing is not None and not writing.done() and len(raw_windows) < _MAX_BATCH:
                    continue
                if writing is not None:
                    await writing  # one write at a time, in order; its offsets are committed by now
                    writing = None
                if offsets:
                    # the write runs in a thread while the next messages are fetched; offsets are
                    # committed only after it (at-least-once; the store is idempotent)
                    writing = asyncio.create_task(
                        self._write_and_commit(c, rows, raw_windows, rejects, names, offsets))
                    rows, raw_windows, rejects, offsets = {}, [], [], {}
            if writing is not None:
                await writing
            if offsets:  # what was read after the last write started
                await self._write_and_commit(c, rows, raw_windows, rejects, names, offsets)
        finally:
            await c.stop()
        log.info("sink stopped: %d messages read, %d new rows stored", self.messages, self.stored)
        return 0

    def _progress(self, said: tuple) -> tuple:
        """One line a minute while running: what was read, stored and rejected since the last one."""
        at, messages, stored, skipped = said
        now = time.monotonic()
        log.info("sink: %d messages read, %d new rows stored, %d rejected in the last %.0f s (%d, %d, %d in all)",
                 self.messages - messages, self.stored - stored, self.skipped - skipped, now - at, self.messages,
                 self.stored, self.skipped)
        return now, self.messages, self.stored, self.skipped

    async def _write_and_commit(self, c, rows, raw_windows, rejects, names, offsets) -> None:
        if rows or raw_windows or rejects:
            await asyncio.to_thread(self._write_batch, rows, raw_windows, rejects, names)
        await c.commit(offsets)

    def _write_batch(self, rows: dict[str, list[tuple[dict, object]]], raw_windows: list, rejects: list[dict],
                     names: dict[str, str]) -> None:
        store = DuckStore.open(self.settings.duckdb_path, False, 60.0)
        fresh = None
        try:
            if raw_windows:
                values = [m.value or b"" for m in raw_windows]
                stored, bad = store.write_windows_json(values)
                self.stored += stored
                rejects = rejects + [reject(raw_windows[i], "schema", "not a window result",
                                            self.settings.sink_reject_bytes) for i in bad]
            for topic, items in rows.items():
                self._write(store, names[topic], items, rejects)
            if rejects:
                self.skipped += len(rejects)
                log.warning("%d message(s) not stored; see the sink_rejects table", len(rejects))
                store.write_rejects(rejects, self.settings.sink_rejects_max_rows,
                                    self.settings.sink_rejects_max_age_days * 86_400)
            fresh = self._retain(store)
        finally:
            store.close()
        if fresh is not None:  # the copy in place of the file, now that it is closed
            os.replace(fresh, self.settings.duckdb_path)

    def _retain(self, store: DuckStore) -> Path | None:
        """The retention pass when it is due (CNSCHED_RETENTION_EVERY_SECONDS); a fresh copy of the file
        to put in its place when the pass removed rows and the file has grown half again since the
        last copy (DuckDB does not give a deleted row's space back)."""
        every = self.settings.retention_every_seconds
        if every <= 0 or time.monotonic() - self.compacted_at < every:
            return None
        self.compacted_at = time.monotonic()
        s = self.settings
        done = compact(store.con, time.time(), Retention(s.retention_raw_days, s.retention_minute_days,
                                                         s.retention_hour_days))
        if not any(done.values()):
            return None
        log.info("retention: %s", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in done.items()))
        path = Path(s.duckdb_path)
        store.con.execute("CHECKPOINT")
        size = path.stat().st_size
        if not copy_due(size, self.copied_bytes):
            return None
        fresh = path.with_name(path.name + ".fresh")
        self.copied_bytes = copy_fresh(store.con, fresh)
        log.info("retention: %s copied fresh, %.1f MB -> %.1f MB", path, size / 1e6, self.copied_bytes / 1e6)
        return fresh

    def _write(self, store: DuckStore, method: str, items: list[tuple[dict, object]], rejects: list[dict]) -> None:
        write = getattr(store, method)
        try:
            self.stored += write([doc for doc, _ in items])
        except _BAD_ROW as exc:  # valid by its contract, yet not storable: one at a time
            log.warning("a batch for %s failed (%s); writing its messages one by one", method, exc)
            for doc, msg in items:
                try:
                    self.stored += write([doc])
                except _BAD_ROW as one:
                    rejects.append(reject(msg, "unstorable", f"{type(one).__name__}: {one}",
                                          self.settings.sink_reject_bytes))


async def run_sink(settings: Settings) -> int:
    from streams.runtime.faust_patches import no_topic_auto_creation

    no_topic_auto_creation()
    sink = WindowSink(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, sink.stop.set)
    return await sink.run()
