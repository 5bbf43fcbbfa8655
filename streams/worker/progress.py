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

import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiokafka import TopicPartition

from streams.kafka import side_consumer

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


def describe_metrics(counters) -> None:
    counters.describe("ingest_offset_gaps_total", "times the consumer jumped past offsets the window state never "
                      "applied (they are read back: streams/worker/progress.py)")
    counters.describe("ingest_gap_messages_read_total", "messages read back after the consumer jumped past them")
    counters.describe("ingest_gap_offsets_unread_total", "offsets jumped past that could not be read back (their "
                      "samples are missing; an error names them)")
