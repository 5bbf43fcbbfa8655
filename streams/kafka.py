"""Kafka plumbing shared by every process: explicit topic creation, clients from settings."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from schemas.topics import ALL_TOPICS
from streams.config import Settings

log = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = 36


async def ensure_topics(settings: Settings, names: tuple[str, ...] = ALL_TOPICS) -> dict[str, int]:
    """Create our topics with the configured partition count; return name -> partitions.

    Topics that exist keep their partition count; a count other than the configured one is
    logged, since Faust needs a table's changelog to match its source topic.
    """
    wanted = [settings.topic(n) for n in names]
    admin = AIOKafkaAdminClient(**settings.kafka_client_kwargs(), request_timeout_ms=15_000)
    await admin.start()
    try:
        existing = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics()
                    if t.get("error_code", 0) == 0}
        missing = [n for n in wanted if n not in existing]
        if missing:
            resp = await admin.create_topics(
                [NewTopic(n, settings.partitions, settings.replication_factor) for n in missing]
            )
            for name, code, *_ in resp.topic_errors:
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"cannot create topic {name}: Kafka error code {code}")
            log.info("created topics %s with %d partitions", ", ".join(missing), settings.partitions)
            for n in missing:
                existing[n] = settings.partitions
        for n in wanted:
            if existing[n] != settings.partitions:
                log.warning(
                    "topic %s has %d partitions, configured %d", n, existing[n], settings.partitions
                )
        return {n: existing[n] for n in wanted}
    finally:
        await admin.close()


def ensure_topics_sync(settings: Settings, names: tuple[str, ...] = ALL_TOPICS) -> dict[str, int]:
    return asyncio.run(ensure_topics(settings, names))


def producer(settings: Settings, **kw) -> AIOKafkaProducer:
    opts = {"linger_ms": 5, "max_batch_size": 1 << 20, "max_request_size": 8 << 20, **kw}
    return AIOKafkaProducer(**settings.kafka_client_kwargs(), **opts)


def consumer(settings: Settings, *topics: str, **kw) -> AIOKafkaConsumer:
    opts = {
        "auto_offset_reset": "earliest",
        "session_timeout_ms": int(settings.session_timeout_seconds * 1000),
        "heartbeat_interval_ms": int(settings.heartbeat_interval_seconds * 1000),
        "fetch_max_wait_ms": settings.fetch_max_wait_ms,
        **kw,
    }
    return AIOKafkaConsumer(*[settings.topic(t) for t in topics], **settings.kafka_client_kwargs(), **opts)
