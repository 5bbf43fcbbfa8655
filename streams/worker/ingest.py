"""Ingest agent: probe.samples -> decode + validate -> sketch panes -> window results.

Per message: decode (JSON or Arrow), validate every row at once, one sketch-kernel call for all the
message's (series, pane) groups, then close every window the event-time watermark has passed and send
its results to netstate.windows. Bad input never stops the agent: an undecodable message, or the bad
rows of a batch, go to probe.deadletter with the reason, the source topic/partition/offset and the
original bytes.

State and crash safety (at-least-once delivery, exact results):
- panes and a per-partition mark (applied offset, max event time, windows closed so far) live in a
  Faust table (raw bytes, changelog-backed), key ``P|<partition>|<src>\\x1f<dst>\\x1f<metric>\\x1f<pane>``
  and ``M|<partition>``; the table is written with an explicit partition, coalesced: every
  ``flush_interval_s`` the changed panes are written once each, not once per message;
- events are acked (so their offsets may be committed) only after the flush that persisted them, and
  only once the broker has those writes (the producer is flushed before the acks);
- a flush first waits for the window results sent so far, then writes the changed panes, then the
  mark, then the deletions of panes whose windows closed (see ``flush`` for why this order);
- every pane carries the offset of the last message applied to it, so after a crash the replayed
  messages are applied to the panes that lack them and to no other; windows at or before the
  restored mark are not emitted again. A window result may be sent twice (same content) after a
  crash between sending and the next flush: consumers key on (src, dst, metric, window_start).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict

import faust
from faust.types import TP

from schemas.probe import (
    MAX_LISTED,
    REASON_INTERNAL,
    REASON_TOO_LARGE,
    REASON_UNDECODABLE,
    DecodeError,
    ProbeBatch,
    decode_samples,
    empty_batch,
)
from schemas.probe_validation import validate_batch
from schemas.windows import encode_window, window_key
from streams.config import Settings
from streams.kafka import INGEST_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import dead_letter, raw_value
from streams.worker.panes import (
    decode_mark,
    encode_mark,
    mark_table_key,
    pane_table_key,
    parse_pane_table_key,
)
from streams.worker.progress import (
    describe_metrics,
    idle_event_time,
    jumps,
    mend_commit_holes,
    note_read_back,
    read_range,
)
from streams.worker.windowing import PartitionWindows

log = logging.getLogger(__name__)

LATE_WINDOW_CLOSED = "window_closed"


def new_windows(settings: Settings) -> PartitionWindows:
    return PartitionWindows(
        settings.window_seconds, settings.window_step_seconds, settings.allowed_lateness_seconds,
        settings.hampel_k,
    )


class Ingest:
    """The ingest agent's state and steps, one PartitionWindows per source partition."""

    def __init__(self, app: faust.App, topics, settings: Settings, counters: Counters, table) -> None:
        self.app = app
        self.topics = topics
        self.settings = settings
        self.counters = counters
        self.table = table
        self.windows: dict[int, PartitionWindows] = {}
        self.pending: dict[int, list] = defaultdict(list)  # unacked events per partition
        self.lock = asyncio.Lock()
        self.last_flush = time.monotonic()
        self.started_at: float | None = None
        # per partition: (monotonic time of its last message, its event time then)
        self.last_arrival: dict[int, tuple[float, float]] = {}

    # -------------------------------------------------------------------------- state
    def partition_state(self, partition: int) -> PartitionWindows:
        state = self.windows.get(partition)
        if state is None:
            state = self.windows[partition] = new_windows(self.settings)
            self._restore(partition, state)
        return state

    def _restore(self, partition: int, state: PartitionWindows) -> None:
        data = self.table.data
        raw_mark = data.get(mark_table_key(partition))
        if raw_mark is None:
            return
        prefix = f"P|{partition}|".encode()
        panes = {}
        for k, v in list(data.items()):
            if isinstance(k, bytes) and k.startswith(prefix) and v:
                panes[parse_pane_table_key(k)[1]] = v
        mark = decode_mark(raw_mark)
        ceiling = time.time() + self.settings.max_clock_skew_seconds
        if mark.max_ts > ceiling:  # persisted by an older version that allowed far-future samples
            log.warning("partition %d: event time %.0f is ahead of the clock; set back to %.0f",
                        partition, mark.max_ts, ceiling)
            mark.max_ts = ceiling
        state.restore(mark, panes)
        log.info("partition %d: restored %d panes, windows closed up to %s",
                 partition, len(panes), state.mark.closed_before)

    # ------------------------------------------------------------------------ process
    async def process(self, events: list) -> None:
        """Decode and validate each message, then window each partition's good rows together."""
        if self.started_at is None:
            self.started_at = time.time()
            self.counters.set("ingest_first_event_unixtime", self.started_at)
        by_partition: dict[int, tuple[list, list, list]] = {}
        owned = self._owned()
        for event in events:
            msg = event.message
            if owned is not None and msg.partition not in owned:
                continue  # fetched before its partition was revoked: not ours now (never acked: read again)
            batch = await self._checked(event)
            batches, offsets, evs = by_partition.setdefault(msg.partition, ([], [], []))
            batches.append(batch)
            offsets.append(msg.offset)
            evs.append(event)
        for partition, (batches, offsets, evs) in by_partition.items():
            state = self.partition_state(partition)
            self.pending[partition].extend(evs)
            late, start, replayed = 0, 0, state.replayed_samples
            for index, expected in jumps(offsets, state.mark.applied_offset):
                late += await self._apply(state, batches[start:index], offsets[start:index], evs[start:index])
                late += await self._read_back(partition, state, expected, offsets[index])
                start = index
            late += await self._apply(state, batches[start:], offsets[start:], evs[start:])
            if late:
                self.counters.inc("samples_late_total", late, reason=LATE_WINDOW_CLOSED)
            if state.replayed_samples > replayed:
                self.counters.inc("samples_replayed_total", state.replayed_samples - replayed)
            self.last_arrival[partition] = (time.monotonic(), state.mark.max_ts)
            await self._emit(state.close_ready())
        self.counters.set("ingest_last_event_unixtime", time.time())

    async def _apply(self, state: PartitionWindows, batches: list, offsets: list, evs: list) -> int:
        """Consecutive messages of one partition, with one kernel call; the samples dropped as late."""
        if not batches:
            return 0
        try:
            return state.add_many(batches, offsets)
        except Exception:  # never expected after validation; find the message, keep the rest
            log.exception("a step of %d messages failed; applying them one by one", len(batches))
            return await self._add_one_by_one(state, batches, offsets, evs)

    async def _read_back(self, partition: int, state: PartitionWindows, start: int, stop: int) -> int:
        """Offsets ``start``..``stop - 1`` of ``partition``, which the consumer jumped past, read with a
        consumer of our own and applied before the message at ``stop`` (streams/worker/progress.py)."""
        c = self.counters
        c.inc("ingest_offset_gaps_total")
        log.warning("partition %d: the consumer jumped from offset %d to %d; reading %d..%d back",
                    partition, start, stop, start, stop - 1)
        late = read = 0
        topic = self.topics.samples.get_topic_name()
        async for chunk in read_range(self.settings.kafka_client_kwargs(), topic, partition, start, stop):
            batches = [await self._checked(ev) for ev in chunk]
            late += await self._apply(state, batches, [ev.message.offset for ev in chunk], chunk)
            read += len(chunk)
        c.inc("ingest_gap_messages_read_total", read)
        await note_read_back(self.app, topic, partition, start, stop - 1)
        if state.mark.applied_offset < stop - 1:
            c.inc("ingest_gap_offsets_unread_total", stop - 1 - max(state.mark.applied_offset, start - 1))
            log.error("partition %d: offsets %d..%d could not be read back (gone from the broker?); "
                      "their samples are missing", partition, state.mark.applied_offset + 1, stop - 1)
        return late

    async def _add_one_by_one(self, state: PartitionWindows, batches: list, offsets: list, evs: list) -> int:
        """Each message alone (panes that hold one already skip it); one that fails is dead-lettered."""
        late = 0
        for batch, offset, event in zip(batches, offsets, evs, strict=True):
            try:
                late += state.add(batch, offset, max(state.mark.closed_before, state.watermark))
            except Exception as exc:
                await self._dead_letter(event, REASON_INTERNAL, f"{type(exc).__name__}: {str(exc)[:200]}")
        return late

    def _settling(self) -> bool:
        """Partitions are being rebalanced or tables recovered: applying events now would restore window
        state from a table the recovery is still rewriting (an older value of a pane could be read)."""
        return bool(getattr(self.app, "rebalancing", False) or getattr(self.app, "in_recovery", False))

    async def settled(self, poll_s: float = 0.05) -> None:
        """Until no rebalance or recovery runs. Events that arrive meanwhile wait for it (outside the
        lock, which the revoke handler takes) and are then applied, or left for their new owner when
        their partition moved (``process`` checks ownership). Dropping them instead lost them: Faust
        seeks to the committed offsets when recovery ends but may still be rebalancing, so events it
        delivered after that seek and before the rebalance's end were never delivered again — their
        samples missing from the windows and the partition's commits stalled before them (issue 32,
        shown on both the embedded broker and librdkafka's mock cluster)."""
        while self._settling():
            await asyncio.sleep(poll_s)

    def _owned(self) -> set[int] | None:
        """The probe partitions this worker is assigned now (None: unknown, e.g. outside a worker)."""
        try:
            name = self.topics.samples.get_topic_name()
            return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == name}
        except Exception:  # no consumer yet
            return None

    async def _emit(self, results: list[dict]) -> None:
        for result in results:
            await self.topics.windows.send(key=window_key(result), value=encode_window(result))
            self.counters.inc("windows_emitted_total")
            self.counters.observe("window_result_lag_seconds", max(time.time() - result["window_end"], 0.0))

    async def close_idle(self) -> None:
        """A partition that got no message for CNSCHED_IDLE_CLOSE_SECONDS: its event time moves on
        with the wall clock from its last sample, so the windows it holds open close (a sample that
        arrives later for a closed window is late, as it would have been anyway)."""
        idle = self.settings.idle_close_seconds
        if idle <= 0 or self._settling():
            return
        now = time.monotonic()
        for partition, state in self.windows.items():
            arrived, max_ts = self.last_arrival.get(partition, (now, state.mark.max_ts))
            self.last_arrival.setdefault(partition, (arrived, max_ts))
            to = idle_event_time(now, arrived, max_ts, idle, bool(state.panes), state.mark.applied_offset,
                                 self._end_offset(partition))
            if to is None:
                continue
            state.advance(to)
            results = state.close_ready()
            if results:
                self.counters.inc("idle_closes_total")
                await self._emit(results)

    def _end_offset(self, partition: int) -> int | None:
        """The partition's end offset as the consumer last saw it (None: not known yet)."""
        try:
            return self.app.consumer.highwater(TP(self.topics.samples.get_topic_name(), partition))
        except Exception:  # no consumer or no fetch yet
            return None

    async def _checked(self, event) -> ProbeBatch:
        """The message's valid rows; what is invalid goes to the dead-letter topic. Nothing a message
        holds escapes as an exception: the worker and the partition go on."""
        payload = raw_value(event)
        c, cfg = self.counters, self.settings
        c.inc("messages_total")
        try:
            if len(payload) > cfg.max_message_bytes:
                return await self._dead_letter(event, REASON_TOO_LARGE, f"{len(payload)} bytes; the limit is "
                                               f"{cfg.max_message_bytes} (CNSCHED_MAX_MESSAGE_BYTES)")
            batch = decode_samples(payload)
            c.observe("ingest_batch_samples", len(batch))
            if len(batch) > cfg.max_message_rows:
                return await self._dead_letter(event, REASON_TOO_LARGE, f"{len(batch)} rows; the limit is "
                                               f"{cfg.max_message_rows} (CNSCHED_MAX_MESSAGE_ROWS)")
            check = validate_batch(batch, time.time(), cfg.max_clock_skew_seconds, cfg.max_sample_age_seconds)
        except DecodeError as exc:
            return await self._dead_letter(event, REASON_UNDECODABLE, str(exc))
        except Exception as exc:
            log.exception("probe message at %s:%d@%d not handled", event.message.topic,
                          event.message.partition, event.message.offset)
            return await self._dead_letter(event, REASON_INTERNAL, f"{type(exc).__name__}: {str(exc)[:200]}")
        if check.rejected:
            for reason, n in check.rejected.items():
                c.inc("samples_rejected_total", n, reason=reason)
            msg = event.message
            await self.topics.deadletter.send(
                key=msg.key,
                value=dead_letter(
                    payload, msg, ",".join(sorted(check.rejected)),
                    f"{check.rejected_total} of {len(batch)} rows rejected",
                    rows_total=len(batch), rows_rejected=check.rejected_total,
                    rows=[r.as_dict() for r in check.listed[:MAX_LISTED]],
                ),
            )
        c.inc("samples_accepted_total", len(check.good))
        return check.good

    async def _dead_letter(self, event, reason: str, detail: str) -> ProbeBatch:
        """The whole message to the dead-letter topic; nothing of it is applied."""
        msg = event.message
        self.counters.inc("messages_rejected_total", reason=reason)
        await self.topics.deadletter.send(key=msg.key, value=dead_letter(raw_value(event), msg, reason, detail))
        return empty_batch()

    # -------------------------------------------------------------------------- flush
    async def flush(self) -> None:
        """Persist what changed, then ack the events it covers (see the module docstring); then keep the
        consumer's commit moving over what the persisted state holds (streams/worker/progress.py), also
        once the stream has gone quiet: a hole Faust's commit waits on is often seen only after its
        last commit, when nothing is left to persist."""
        if any(self.pending.values()) or any(s.dirty or s.dropped for s in self.windows.values()):
            await self._persist()
        await mend_commit_holes(self.app, self.topics.samples.get_topic_name(),
                                {p: s.mark.applied_offset for p, s in self.windows.items()}, self.counters)

    async def _persist(self) -> None:
        await self.app.producer.flush()  # window results sent so far are delivered
        data = self.table.data
        changelog = self.table.changelog_topic
        for partition, state in self.windows.items():
            mark, changed, dropped = state.take_changes()
            # changed panes, then the mark, then the deletions: a partition's writes reach the broker
            # in order, so a crash mid-flush leaves either an older mark (its messages are replayed
            # and each pane takes those it lacks) or every pane written (deleted panes that
            # survive lie in windows the mark has closed). A newer mark over older panes would
            # drop the replayed samples of those panes as late.
            writes = [(pane_table_key(partition, k), v) for k, v in changed.items()]
            writes.append((mark_table_key(partition), encode_mark(mark)))
            writes += [(pane_table_key(partition, k), None) for k in dropped]
            for key, value in writes:
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
                # straight to the producer (not Faust's one-by-one send_soon buffer), in order
                await changelog.send(key=key, value=value, partition=partition)
        # the sends above are only queued: the events are acked (their offsets may be committed) once
        # the state that holds their effects is delivered, or a SIGKILL now would lose it
        await self.app.producer.flush()
        for events in self.pending.values():
            for ev in events:
                ev.ack()
            events.clear()
        self.last_flush = time.monotonic()

    async def revoke(self, partitions: set[int]) -> None:
        async with self.lock:
            await self.flush()
            for p in partitions:
                self.windows.pop(p, None)
                self.pending.pop(p, None)

    async def assign(self, partitions: set[int]) -> None:
        """Newly assigned partitions start from their recovered table state: whatever this worker held
        for them before (from before a revoke) is dropped, to be restored on first use."""
        async with self.lock:
            for p in partitions:
                self.windows.pop(p, None)
                self.last_arrival.pop(p, None)


def register(app: faust.App, topics, settings: Settings, counters: Counters, sample_partitions: int) -> Ingest:
    describe_metrics(counters)
    table = app.Table(
        table_name(settings, INGEST_TABLE),
        key_type=bytes,  # bytes -> raw key and value codecs, also for the changelog
        value_type=bytes,
        partitions=sample_partitions,
    )
    ingest = Ingest(app, topics, settings, counters, table)
    interval = settings.flush_interval_seconds

    @app.agent(topics.samples, name="ingest")
    async def ingest_agent(stream):
        # events come in groups (up to take_max or take_within_s): one kernel call per group and
        # partition; acks are ours (noack), after the flush that persisted the events' effects
        async for events in stream.noack_take(settings.take_max_messages, settings.take_within_seconds):
            while True:
                await ingest.settled()
                async with ingest.lock:
                    if ingest._settling():  # another rebalance began while the lock was awaited
                        continue
                    await ingest.process(events)
                    if time.monotonic() - ingest.last_flush >= interval:
                        await ingest.flush()
                    break

    @app.timer(interval=interval)
    async def ingest_flush():
        async with ingest.lock:
            await ingest.close_idle()
            await ingest.flush()

    @app.on_partitions_revoked.connect
    async def on_revoked(app, revoked, **kwargs):
        await ingest.revoke({tp.partition for tp in revoked if tp.topic == topics.samples.get_topic_name()})

    @app.on_partitions_assigned.connect
    async def on_assigned(app, assigned, **kwargs):
        await ingest.assign({tp.partition for tp in assigned if tp.topic == topics.samples.get_topic_name()})

    return ingest
