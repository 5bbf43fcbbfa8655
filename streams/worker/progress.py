"""Where the reading of a probe partition stands: messages the consumer jumped past, read back by
the ingest step itself, and when a quiet partition counts as idle (issue 32).

After a SIGKILL and restart, Faust may deliver a partition's messages from where its fetcher already
was instead of from its seek to the committed offsets: the offsets in between are counted as a "gap"
(``Consumer._add_gap``, its handling of compacted topics), never delivered, and committed past once a
later message is acked. Seen in debug logs on both Kafka implementations: the window state held
offset 410, the events after the restart ran 286…305 and then 577…; 411…576 never came.

Sending Faust's consumer back from inside the agent deadlocked with its flow control (its fetcher
waits for the agent's buffer), so the ingest step reads the skipped range with a consumer of its own
(no group, nothing committed), applies it before the messages that jumped, and only then lets those be
acked: Faust's commit past the gap then covers offsets whose effects are in the state.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiokafka import TopicPartition
from faust.types import TP

from streams.kafka import side_consumer

log = logging.getLogger(__name__)

# a read that brings nothing new for this long stops (retention removed the range, or the broker
# holds offsets with nothing behind them): the rest of the range is reported as lost, not waited for
STALL_S = 10.0


def jumps(offsets: list[int], applied: int) -> list[tuple[int, int]]:
    """Where a partition's ``offsets`` (in read order) stop following on from ``applied`` (the last
    offset its state applied; -1: none yet): ``(index, expected)`` for each message whose offset is past
    ``expected``, the offset that should have come next. A repeat follows on (replayed); a fresh
    partition may start anywhere."""
    out = []
    expect = applied + 1
    for k, o in enumerate(offsets):
        if applied >= 0 and o > expect:
            out.append((k, expect))
        expect, applied = max(expect, o + 1), max(applied, o)
    return out


@dataclass(frozen=True, slots=True)
class ReadEvent:
    """A record read back, shaped as the ingest step reads an event: ``.message`` (topic, partition,
    offset, key) and ``.value`` (the bytes off the wire)."""

    message: object
    value: bytes


async def read_range(client_kwargs: dict, topic: str, partition: int, start: int, stop: int,
                     stall_s: float = STALL_S) -> AsyncIterator[list[ReadEvent]]:
    """The records of ``topic``/``partition`` with ``start <= offset < stop``, chunk by chunk, in
    offset order. Stops early when nothing new comes for ``stall_s``."""
    tp = TopicPartition(topic, partition)
    c = side_consumer(client_kwargs, auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign([tp])
        c.seek(tp, start)
        last_progress = time.monotonic()
        position = start
        while position < stop and time.monotonic() - last_progress < stall_s:
            got = (await c.getmany(tp, timeout_ms=300)).get(tp, [])
            chunk = [ReadEvent(r, r.value if isinstance(r.value, bytes) else bytes(r.value or b""))
                     for r in got if start <= r.offset < stop]
            if got:
                position, last_progress = got[-1].offset + 1, time.monotonic()
            if chunk:
                yield chunk
    finally:
        await c.stop()


def idle_event_time(now: float, arrived: float, max_ts: float, idle_s: float, open_panes: bool, applied_offset: int,
                    end_offset: int | None) -> float | None:
    """The event time an idle partition moves on to, or None when it is not idle: a message came within
    ``idle_s`` (of the monotonic clock), nothing is open, or messages wait in the broker beyond the
    last one applied (``end_offset``: the partition's end as last fetched). A partition behind is
    not idle: a backlog read slowly must not have its windows closed under it by the wall clock
    (`cnsched fuzz` lost valid samples as late so while the worker chewed hostile messages)."""
    if now - arrived < idle_s or not open_panes or not math.isfinite(max_ts):
        return None
    if end_offset is not None and applied_offset + 1 < end_offset:
        return None
    return max_ts + (now - arrived)


def commit_hole(committed: int | None, lowest_done: int | None, persisted: int) -> tuple[int, int] | None:
    """Offsets to declare done so Faust's commit of a partition moves again, or None.

    Faust commits a partition up to the first hole in what was acked, and not at all while its lowest
    acked offset (``lowest_done``, gaps it already knows counted as acked) lies more than one past the
    offset it last committed (``committed``, the next offset to read; None: nothing yet, which it treats
    as no bound): offsets it delivered but nobody acked, or skipped without noting a gap, hold the
    commit there for ever, and the next restart replays everything after it (issue 55). Those offsets
    are ``committed + 1 .. lowest_done - 1`` (Faust lets ``committed`` itself pass); they may be
    declared done only when the state that holds their effects is persisted: ``persisted``, the last
    offset the partition's persisted mark has applied (every offset up to it is applied: the ingest
    reads back what the consumer jumped past)."""
    if not committed or lowest_done is None or lowest_done - committed <= 1:
        return None
    if persisted < lowest_done - 1:
        return None
    return committed + 1, lowest_done - 1


def unique_acked(acked: list[int], committed: int | None) -> list[int]:
    """Faust's acked offsets of a partition without repeats or offsets it committed past, in order.

    Faust adds a gap's offsets to the acked list when its commit reaches the gap, without looking
    whether some were acked too (a message delivered after the gap was noted, or again after a seek);
    then it commits only up to the first repeat per commit interval, one offset every few seconds,
    so a gap of a few hundred offsets held a partition's commit for many minutes after a restart
    (issue 55: the CI run 5,564 messages behind after a jump of 187 offsets)."""
    floor = committed or 0
    return sorted({o for o in acked if o >= floor})


def _merge_gaps(gaps, acked: list[int]) -> None:
    """The gap offsets up to the highest acked one moved into ``acked`` (as Faust's commit does:
    ``Consumer._new_offset``), so the repeats they bring are dropped before Faust counts them."""
    if not gaps:
        return
    top = max(acked)
    covered = gaps.overlap(0, top + 1)
    if covered:
        for g in covered:
            acked.extend(range(g.begin, g.end))
        gaps.chop(0, max(top + 1, max(g.end for g in covered)))


async def mend_commit_holes(app, topic: str, persisted: dict[int, int], counters) -> list[tuple[int, int, int]]:
    """Faust's commit of each partition of ``topic`` is kept moving: acked offsets repeated or below
    its commit are dropped (``unique_acked``), and a hole it would wait on for ever (``commit_hole``)
    is noted as a gap (``Consumer._add_gap``: how Faust itself passes offsets it never delivered) once
    the persisted state covers it. ``persisted``: per partition, the last offset applied in the
    persisted state. Returns ``(partition, first, last)`` per hole mended; repeats and holes are
    logged and counted. Faust's bookkeeping read here is private: if its shape changes, commits go
    on as before and the error says so."""
    mended = []
    try:
        consumer = app.consumer
        for partition, applied in persisted.items():
            tp = TP(topic, partition)
            acked, committed = consumer._acked.get(tp), consumer._committed_offset.get(tp)
            if not acked:
                continue
            gaps = consumer._gap.get(tp)
            if gaps or len(acked) != len(consumer._acked_index[tp]) or min(acked) < (committed or 0):
                _merge_gaps(gaps, acked)
                unique = unique_acked(acked, committed)
                if len(unique) < len(acked):
                    counters.inc("ingest_commit_repeats_total", len(acked) - len(unique))
                    acked[:] = unique
                    consumer._acked_index[tp] = set(unique)
            if not acked or not committed:
                continue
            hole = commit_hole(committed, min(acked), applied)
            if hole is not None:
                await consumer._add_gap(tp, hole[0], hole[1])
                mended.append((partition, *hole))
    except Exception:
        log.exception("could not check the consumer's commits for holes")
    for partition, first, last in mended:
        counters.inc("ingest_commit_holes_total")
        log.warning("partition %d: the commit waited on offsets %d..%d that were never acked; their effects are "
                    "persisted, so they are noted as passed", partition, first, last)
    return mended


async def note_read_back(app, topic: str, partition: int, first: int, last: int) -> None:
    """Offsets ``first..last`` of ``partition``, read back by the ingest step itself, noted as a gap in
    Faust's consumer (``Consumer._add_gap``), so its commit passes them once a later offset is acked
    (after the flush that persists their effects). Faust notes a jump itself only when it knows where
    it read last: after a restart that found nothing committed it does not, and its commit stopped
    for ever before the offsets read back (issue 55: a partition's commit held at 3, its acked offsets
    from 1,027 on). A stand-in without a consumer (tests of the ingest step alone) is passed over."""
    consumer = getattr(app, "consumer", None)
    if consumer is None:
        return
    try:
        await consumer._add_gap(TP(topic, partition), first, last)
    except Exception:
        log.exception("could not note offsets %d..%d of partition %d as read", first, last, partition)


def describe_metrics(counters) -> None:
    """The ingest step's metrics (streams/worker/ingest.py), this module's among them."""
    counters.describe("messages_total", "probe.samples messages read")
    counters.describe("samples_accepted_total", "probe samples that passed validation")
    counters.describe("samples_rejected_total", "probe samples sent to the dead-letter topic, by reason")
    counters.describe("messages_rejected_total", "whole probe messages sent to the dead-letter topic, by reason")
    counters.describe("samples_late_total", "samples later than the allowed lateness, dropped, by reason")
    counters.describe("samples_replayed_total", "samples of messages applied before (read again after a restart, "
                                                "or sent twice): skipped, counted once")
    counters.describe("windows_emitted_total", "window results sent to netstate.windows")
    counters.describe("idle_closes_total", "times an idle partition's event time followed the wall clock")
    counters.describe("ingest_first_event_unixtime", "when this worker began its first ingest step")
    counters.describe("ingest_last_event_unixtime", "when this worker ended its latest ingest step")
    counters.describe("ingest_offset_gaps_total", "times the consumer jumped past offsets the window state never "
                      "applied (they are read back: streams/worker/progress.py)")
    counters.describe("ingest_gap_messages_read_total", "messages read back after the consumer jumped past them")
    counters.describe("ingest_commit_holes_total", "times the consumer's commit of a partition was held at offsets "
                      "nobody acked, whose effects the persisted state holds: noted as passed (issue 55)")
    counters.describe("ingest_commit_repeats_total", "acked offsets the consumer held twice (or below its commit), "
                      "which slowed its commit to one offset per interval: dropped (issue 55)")
    counters.describe("ingest_gap_offsets_unread_total", "offsets jumped past that could not be read back (their "
                      "samples are missing; an error names them)")
