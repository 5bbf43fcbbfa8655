"""Two corrections to Faust's Kafka driver, installed by streams.app.faust_app before a worker starts.

1. Fetch wait: Faust builds its aiokafka consumer with fetch_max_wait_ms=1500, fixed. A broker that
   holds a fetch for the whole wait when no data is there (the embedded Tansu broker does) then adds
   up to 1.5 s of latency; the wait comes from configuration instead (Apache Kafka answers as soon as
   data arrives either way).
2. True high watermarks for table recovery: Faust recovers a table from its changelog up to the
   partition's end offset as ListOffsets reports it. The embedded Tansu broker (v0.6) answers
   ListOffsets with the *base offset of the last record batch* + 1, not the end: a changelog whose last
   batch held many records was recovered without it, and a restarted worker lost window state (samples
   counted in no window, measured in tests/integration/test_crash_safety.py). The end is read from a
   fetch of the last batch instead (its records, and the high watermark of the fetch response, are
   right on every broker); on Apache Kafka both agree and the check costs one fetch per recovery.
"""

from __future__ import annotations

import logging
import time

from aiokafka import TopicPartition

from streams.kafka import side_consumer

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 5.0


def use_fetch_max_wait(ms: int) -> None:
    from faust.transport.drivers import aiokafka as faust_aiokafka

    cls = faust_aiokafka.AIOKafkaConsumerThread
    original = getattr(cls, "_cnsched_original_create_worker_consumer", cls._create_worker_consumer)

    def create_worker_consumer(self, transport):
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = ms  # read by aiokafka when the consumer starts its fetcher
        return consumer

    cls._cnsched_original_create_worker_consumer = original
    cls._create_worker_consumer = create_worker_consumer


def no_topic_auto_creation() -> None:
    """Our clients never let a metadata request create a topic: topics come from ``ensure_topics``
    with their partition counts (a single-partition state topic auto-created with the broker's default
    count breaks its table: Faust's PartitionsMismatch). Matters after a memory broker's restart, when
    every client still running asks for topics the broker no longer has. Kafka brokers in production
    set ``auto.create.topics.enable=false`` as well (docker-compose.yml)."""
    from aiokafka.protocol import metadata

    cls = metadata.MetadataRequest
    original = getattr(cls, "_cnsched_original_init", cls.__init__)

    def __init__(self, topics=None, allow_auto_topic_creation=False):
        original(self, topics, allow_auto_topic_creation)

    cls._cnsched_original_init = original
    cls.__init__ = __init__


def use_idle_timeout(app, seconds: float) -> None:
    """Close a connection that has not sent a whole request ``seconds`` after it opened or after its
    last answer. aiohttp (>= 3.10) arms its keep-alive timer when a connection opens and closes it only
    while no request is being handled, so its ``keepalive_timeout`` is a header timeout as well; Faust
    builds the AppRunner without one (aiohttp's default is an hour)."""
    app.web._runner._kwargs["keepalive_timeout"] = seconds


def cancel_on_disconnect(app) -> None:
    """Cancel a request's handler when its client goes away (aiohttp >= 3.9 lets it run to the end by
    default): its heavy work then stops at its next check (streams.web.base.WebContext.heavy)."""
    app.web._runner._kwargs["handler_cancellation"] = True


# set in the environment of a worker that restarted itself because the broker lost our topics
# (streams/worker/broker_watch.py): only then can a changelog hold offsets with nothing behind them
AFTER_BROKER_LOSS_ENV = "_CNSCHED_AFTER_BROKER_LOSS"


async def true_ends(client_kwargs: dict, ends: dict, unreadable_is_empty: bool = False) -> dict:
    """``ends`` (partition -> end offset as ListOffsets says) corrected by fetching from end - 1 on to
    the last record the broker returns: its offset + 1 is the end (Tansu reports a partition's end as
    the start of its last batch, and after a producer was killed mid-stream, by more than a batch).

    With ``unreadable_is_empty`` (a worker restarted after the broker lost our topics), a partition
    with an end but no record to read, from end - 1 or from its start, has nothing to recover: its end
    is 0. Tansu accepts writes to a topic it no longer has (a client that cached the metadata from
    before a memory-storage restart) and counts their offsets without storing them; a recovery waiting
    for those would wait for ever. Elsewhere a slow fetch must never make a changelog look empty."""
    check = {tp: e for tp, e in ends.items() if e is not None and e > 0}
    if not check:
        return dict(ends)
    out = dict(ends)
    c = side_consumer(client_kwargs, auto_offset_reset="latest")
    await c.start()
    try:
        parts = {TopicPartition(tp.topic, tp.partition): tp for tp in check}
        c.assign(list(parts))
        for ktp, tp in parts.items():
            c.seek(ktp, check[tp] - 1)
        # read on from end - 1 until a fetch brings nothing more: the end may lag by more than one
        # batch (what is read past it is what the broker holds and acknowledged)
        pending, deadline = set(parts), time.monotonic() + CHECK_TIMEOUT_S
        seen: set = set()
        while pending and time.monotonic() < deadline:
            batch = await c.getmany(*pending, timeout_ms=300)
            for ktp in list(pending):
                msgs = batch.get(ktp, [])
                if msgs:
                    out[parts[ktp]] = max(out[parts[ktp]], msgs[-1].offset + 1, c.highwater(ktp) or 0)
                    seen.add(ktp)
                elif ktp in seen:  # read to the end
                    pending.discard(ktp)
        pending -= seen  # those still reading at the deadline keep what was read
        if pending and unreadable_is_empty:  # nothing at end - 1: is anything readable at all?
            for ktp in pending:
                c.seek_to_beginning(ktp)
            got = await c.getmany(*pending, timeout_ms=int(CHECK_TIMEOUT_S * 1000))
            for ktp in pending - {k for k, msgs in got.items() if msgs}:
                out[parts[ktp]] = 0
    finally:
        await c.stop()
    moved = {tp: (ends[tp], out[tp]) for tp in check if out[tp] != ends[tp]}
    if moved:
        log.info("changelog ends corrected (ListOffsets reports batch starts, or offsets with nothing to read): %s", moved)
    return out


def use_true_highwaters(client_kwargs: dict, unreadable_is_empty: bool = False) -> None:
    from faust.transport.drivers import aiokafka as faust_aiokafka

    cls = faust_aiokafka.AIOKafkaConsumerThread
    original = getattr(cls, "_cnsched_original_highwaters", cls._highwaters)

    async def _highwaters(self, partitions):
        ends = await original(self, partitions)
        if self.consumer.in_transaction:
            return ends
        return await true_ends(client_kwargs, dict(ends), unreadable_is_empty)

    cls._cnsched_original_highwaters = original
    cls._highwaters = _highwaters
