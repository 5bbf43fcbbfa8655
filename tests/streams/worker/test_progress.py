"""Messages the consumer jumped past are read back and applied before those that jumped (issue 32;
streams/worker/progress.py). Reads go to a real broker: the embedded one and librdkafka's mock cluster."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import faust
import numpy as np
from aiokafka import AIOKafkaProducer
from faust.types import TP

from schemas.probe import encode_arrow
from schemas.topics import PROBE_SAMPLES
from streams.kafka import ensure_topics
from streams.metrics import Counters
from streams.worker.ingest import Ingest
from streams.worker.progress import commit_hole, jumps, mend_commit_holes, read_range, unique_acked


def test_jumps_name_where_the_read_stops_following_on():
    assert jumps([5, 6, 7], 4) == []  # the next ones
    assert jumps([3, 4, 5, 6], 4) == []  # replayed, then new
    assert jumps([5, 6, 9, 10], 4) == [(2, 7)]  # 7 and 8 never came
    assert jumps([7, 8], 4) == [(0, 5)]  # 5 and 6 never came
    assert jumps([5, 8, 9, 12], 4) == [(1, 6), (3, 10)]  # two holes in one step
    assert jumps([], 4) == []


def test_a_fresh_partition_starts_anywhere_then_must_follow_on():
    assert jumps([10, 11], -1) == []
    assert jumps([10, 12], -1) == [(1, 11)]


def test_a_commit_held_at_a_hole_is_freed_only_over_persisted_offsets():
    # Faust committed 100 (the next to read) and its lowest acked is 150: 101..149 hold it (it lets 100 pass)
    assert commit_hole(100, 150, persisted=152) == (101, 149)
    assert commit_hole(100, 150, persisted=149) == (101, 149)  # exactly the hole persisted
    assert commit_hole(100, 150, persisted=148) is None  # 149 not in the persisted state yet
    assert commit_hole(100, 101, persisted=152) is None  # follows on: Faust commits by itself
    assert commit_hole(100, 100, persisted=152) is None
    assert commit_hole(None, 150, persisted=152) is None  # nothing committed: Faust has no bound
    assert commit_hole(0, 150, persisted=152) is None  # Faust reads 0 as nothing committed
    assert commit_hole(100, None, persisted=152) is None  # nothing acked


async def test_faust_s_own_commit_moves_past_a_hole_once_noted():
    """On Faust's own consumer: acked 150..152 over a commit at 100 hold its commit for ever; once the
    persisted state covers the hole it is noted as a gap, and Faust's next commit is 153. The same
    with the state behind (148) leaves Faust's commit where it was: nothing unpersisted is passed."""
    for persisted, expected in ((152, 153), (148, None)):
        app = faust.App(f"hole-{persisted}", broker="kafka://127.0.0.1:1")
        consumer, tp = app.consumer, TP("samples", 0)
        consumer._committed_offset[tp] = 100
        consumer._acked[tp].extend([150, 151, 152])
        consumer._acked_index[tp].update([150, 151, 152])
        counters = Counters()
        mended = await mend_commit_holes(app, "samples", {0: persisted}, counters)
        assert mended == ([(0, 101, 149)] if expected else [])
        assert consumer._new_offset(tp) == expected
        assert counters.get("ingest_commit_holes_total") == len(mended)


def test_unique_acked_drops_repeats_and_what_was_committed():
    assert unique_acked([484, 481, 482, 482, 483, 479, 484], committed=481) == [481, 482, 483, 484]
    assert unique_acked([3, 1, 2, 1], committed=None) == [1, 2, 3]
    assert unique_acked([5, 6], committed=7) == []


async def test_faust_s_own_commit_no_longer_crawls_over_a_gap_whose_offsets_were_acked_too():
    """Faust noted a gap 481..491 and then those messages were delivered and acked as well: its commit
    moved one offset per commit (seen after a restart: 487, 488, ... two seconds apart). After the
    mend its next commit takes every offset acked: 600."""
    for mend, expected in ((False, [482, 483, 484]), (True, [600, 600, 600])):
        app = faust.App(f"crawl-{mend}", broker="kafka://127.0.0.1:1")
        consumer, tp = app.consumer, TP("samples", 0)
        consumer._committed_offset[tp] = 480
        await consumer._add_gap(tp, 481, 491)
        consumer._acked[tp].extend(range(480, 600))
        consumer._acked_index[tp].update(range(480, 600))
        commits, counters = [], Counters()
        for _ in range(3):
            if mend:
                await mend_commit_holes(app, "samples", {0: 599}, counters)
            commits += _commits(consumer, tp, 1)
        assert commits == expected
        assert counters.get("ingest_commit_repeats_total") == (11 if mend else 0)


def _message(k: int, now: float) -> bytes:
    # message k: 10 samples of one series, k * 10 .. k * 10 + 9 ms after now - 60 s, values k
    ts = now - 60 + (k * 10 + np.arange(10)) / 1000
    return encode_arrow(ts, ["a"] * 10, ["b"] * 10, ["rtt_ms"] * 10, np.full(10, float(k)))


async def _produce(settings, n: int, now: float) -> list[bytes]:
    if settings.kafka_create_topics:
        await ensure_topics(settings)
    p = AIOKafkaProducer(**settings.kafka_client_kwargs(), linger_ms=0)
    await p.start()
    try:
        values = [_message(k, now) for k in range(n)]
        for v in values:
            await p.send_and_wait(settings.topic(PROBE_SAMPLES), v, partition=0)
    finally:
        await p.stop()
    return values


async def _read(settings, start: int, stop: int, stall_s: float = 10.0) -> list:
    out = []
    async for chunk in read_range(settings.kafka_client_kwargs(), settings.topic(PROBE_SAMPLES), 0, start, stop,
                                  stall_s=stall_s):
        out.extend(chunk)
    return out


def test_read_range_returns_exactly_the_offsets_asked_for(make_settings_both):
    settings = make_settings_both()

    async def run():
        values = await _produce(settings, 30, time.time())
        got = await _read(settings, 7, 19)
        assert [e.message.offset for e in got] == list(range(7, 19))
        assert [e.value for e in got] == values[7:19]
        # past the end: what exists, then it stops once nothing more comes
        t0 = time.monotonic()
        tail = await _read(settings, 25, 40, stall_s=1.0)
        assert [e.message.offset for e in tail] == list(range(25, 30))
        assert time.monotonic() - t0 < 8

    asyncio.run(run())


class _Sent:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    async def send(self, key=None, value=None, **kw):
        self.values.append(value)


def _ingest(settings, app=None) -> tuple[Ingest, Counters]:
    """The ingest step with the Faust parts it touches stood in for (no table changelog; a consumer only
    when ``app``, a Faust app never started, is given): what is under test is which messages reach the
    window state, and what Faust's consumer is told."""
    name = settings.topic(PROBE_SAMPLES)
    topics = SimpleNamespace(samples=SimpleNamespace(get_topic_name=lambda: name), windows=_Sent(),
                             deadletter=_Sent())
    counters = Counters()
    return Ingest(app or SimpleNamespace(), topics, settings, counters, SimpleNamespace(data={})), counters


def _commits(consumer, tp, times: int = 3) -> list:
    """Faust's commit of ``tp`` after each of ``times`` commit intervals (what ``Consumer.commit`` would
    send: ``_new_offset`` when ``_should_commit``)."""
    out = []
    for _ in range(times):
        offset = consumer._new_offset(tp)
        if offset is not None and consumer._should_commit(tp, offset):
            consumer._committed_offset[tp] = offset
        out.append(consumer._committed_offset[tp])
    return out


def _ack(consumer, tp, offsets) -> None:
    """What ``Consumer.ack`` records of each offset (the events here are stand-ins, never acked)."""
    consumer._acked[tp].extend(offsets)
    consumer._acked_index[tp].update(offsets)


async def _with_consumer(settings, name: str):
    """(values produced, the ingest step over a never-started Faust app, its counters, Faust's consumer,
    the probe partition 0 as Faust names it): 20 messages on a real broker."""
    values = await _produce(settings, 20, time.time())
    app = faust.App(name, broker="kafka://127.0.0.1:1")
    ingest, counters = _ingest(settings, app)
    return values, ingest, counters, app.consumer, TP(settings.topic(PROBE_SAMPLES), 0)


def test_offsets_read_back_are_noted_so_faust_s_commit_passes_them(make_settings_both):
    """Issue 55, the second stall: after restarts that left nothing committed, Faust delivered offsets
    0..2 and then 12.. of a partition without noting a gap (it notes one only when it knows where it
    read last). The ingest step read 3..11 back, but only Faust's own deliveries are acked: its commit
    went to 3 and stayed there for ever (seen: 3, acked from 1,027 on). Now the read-back range is
    noted as a gap: once 0..2 and 12..19 are acked (after the flush that persists them), Faust's commit
    is 20."""
    settings = make_settings_both()

    async def run():
        values, ingest, counters, consumer, tp = await _with_consumer(settings, "read-back")
        await ingest.process(_events(settings, values, range(0, 3)))
        await ingest.process(_events(settings, values, range(12, 20)))
        assert counters.get("ingest_gap_messages_read_total") == 9
        assert sorted((g.begin, g.end) for g in consumer._gap[tp]) == [(3, 12)]
        _ack(consumer, tp, [*range(0, 3), *range(12, 20)])
        assert _commits(consumer, tp) == [20, 20, 20]

    asyncio.run(run())


def test_a_quiet_stream_s_flush_still_frees_a_commit_held_at_a_hole(make_settings_both):
    """The hole is often seen only after Faust's last commit, when the stream has ended and a flush has
    nothing to persist: the flush timer still mends it. Faust committed 3; 12..19 are acked and the
    state (persisted: nothing left to write) applied up to 19; one flush later Faust's commit is 20."""
    settings = make_settings_both()

    async def run():
        values, ingest, counters, consumer, tp = await _with_consumer(settings, "quiet")
        await ingest.process(_events(settings, values, range(0, 20)))
        ingest.pending[0].clear()
        ingest.windows[0].take_changes()  # as if the last flush persisted it all
        consumer._committed_offset[tp] = 3
        _ack(consumer, tp, range(12, 20))
        assert _commits(consumer, tp, 1) == [3]  # held at the hole 4..11
        await ingest.flush()
        assert _commits(consumer, tp) == [20, 20, 20]
        assert counters.get("ingest_commit_holes_total") == 1

    asyncio.run(run())


def _events(settings, values: list[bytes], offsets: range) -> list:
    topic = settings.topic(PROBE_SAMPLES)
    return [SimpleNamespace(message=SimpleNamespace(topic=topic, partition=0, offset=o, key=None), value=values[o])
            for o in offsets]


def test_a_step_that_jumped_reads_the_hole_back_before_applying(make_settings_both):
    settings = make_settings_both()

    async def run():
        values = await _produce(settings, 20, time.time())
        ingest, counters = _ingest(settings)
        await ingest.process(_events(settings, values, range(0, 5)))
        # offsets 5..11 never come from the consumer; 12..19 do
        await ingest.process(_events(settings, values, range(12, 20)))
        state = ingest.windows[0]
        assert state.mark.applied_offset == 19
        assert sum(p.count for p in state.panes.values()) == 20 * 10  # every message's samples, once
        assert counters.get("ingest_offset_gaps_total") == 1
        assert counters.get("ingest_gap_messages_read_total") == 7
        assert counters.get("ingest_gap_offsets_unread_total") == 0
        # replayed messages after that are not counted twice
        await ingest.process(_events(settings, values, range(3, 20)))
        assert sum(p.count for p in state.panes.values()) == 20 * 10
        assert counters.get("ingest_offset_gaps_total") == 1

    asyncio.run(run())
