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

from aiokafka import AIOKafkaConsumer, TopicPartition

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


def use_idle_timeout(app, seconds: float) -> None:
    """Close a connection that has not sent a whole request ``seconds`` after it opened or after its
    last answer. aiohttp (>= 3.10) arms its keep-alive timer when a connection opens and closes it only
    while no request is being handled, so its ``keepalive_timeout`` is a header timeout as well; Faust
    builds the AppRunner without one (aiohttp's default is an hour)."""
    app.web._runner._kwargs["keepalive_timeout"] = seconds


async def true_ends(client_kwargs: dict, ends: dict) -> dict:
    """``ends`` (partition -> end offset as ListOffsets says) corrected by fetching from end - 1: the
    fetch returns the whole batch holding that offset, and its last offset + 1 is the end."""
    check = {tp: e for tp, e in ends.items() if e is not None and e > 0}
    if not check:
        return dict(ends)
    out = dict(ends)
    c = AIOKafkaConsumer(**client_kwargs, group_id=None, enable_auto_commit=False, auto_offset_reset="latest",
                         fetch_max_wait_ms=100)
    await c.start()
    try:
        parts = {TopicPartition(tp.topic, tp.partition): tp for tp in check}
        c.assign(list(parts))
        for ktp, tp in parts.items():
            c.seek(ktp, check[tp] - 1)
        pending, deadline = set(parts), time.monotonic() + CHECK_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            batch = await c.getmany(*pending, timeout_ms=500)
            for ktp, msgs in batch.items():
                tp = parts[ktp]
                out[tp] = max(out[tp], msgs[-1].offset + 1 if msgs else 0, c.highwater(ktp) or 0)
                pending.discard(ktp)
    finally:
        await c.stop()
    moved = {tp: (ends[tp], out[tp]) for tp in check if out[tp] != ends[tp]}
    if moved:
        log.info("changelog ends corrected past ListOffsets (broker reports batch starts): %s", moved)
    return out


def use_true_highwaters(client_kwargs: dict) -> None:
    from faust.transport.drivers import aiokafka as faust_aiokafka

    cls = faust_aiokafka.AIOKafkaConsumerThread
    original = getattr(cls, "_cnsched_original_highwaters", cls._highwaters)

    async def _highwaters(self, partitions):
        ends = await original(self, partitions)
        if self.consumer.in_transaction:
            return ends
        return await true_ends(client_kwargs, dict(ends))

    cls._cnsched_original_highwaters = original
    cls._highwaters = _highwaters
