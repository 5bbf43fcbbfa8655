"""Kafka plumbing shared by every process: explicit topic creation, clients from settings."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from schemas.topics import ALL_TOPICS, STATE_TOPICS
from streams.config import Settings

log = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = 36


INGEST_TABLE = "ingest-panes"
NETSTATE_TABLE = "netstate"
COMPUTE_TABLE = "compute"
TASKS_TABLE = "tasks"
QUOTAS_TABLE = "quotas"
MAINTENANCE_TABLE = "maintenance"


def table_name(settings: Settings, base: str) -> str:
    return f"{settings.topic_prefix}{base}"


def table_changelogs(settings: Settings, sample_partitions: int) -> dict[str, int]:
    """The worker's Faust table changelogs (``<app_id>-<table>-changelog``) and their partitions,
    which must equal their source topics'. Created by us, before Faust or a metadata request could
    let a broker auto-create them with its own default count."""
    tables = {INGEST_TABLE: sample_partitions, NETSTATE_TABLE: 1, COMPUTE_TABLE: 1, TASKS_TABLE: 1, QUOTAS_TABLE: 1,
              MAINTENANCE_TABLE: 1}
    return {f"{settings.app_id}-{table_name(settings, t)}-changelog": n for t, n in tables.items()}


async def ensure_topics(
    settings: Settings, names: tuple[str, ...] = ALL_TOPICS, exact: dict[str, int] | None = None
) -> dict[str, int]:
    """Create our topics; return name -> partitions.

    Every topic gets ``CNSCHED_PARTITIONS`` partitions except the state topics (one partition: the
    state agent's single consistent view). Topics that exist keep their partition count; another
    count than the intended one is logged, since Faust needs a table's changelog to match its source.
    """
    intended = {settings.topic(n): (1 if n in STATE_TOPICS else settings.partitions) for n in names}
    intended.update(exact or {})
    wanted = list(intended)
    admin = AIOKafkaAdminClient(**settings.kafka_client_kwargs(), request_timeout_ms=15_000)
    await admin.start()
    try:
        existing = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics()
                    if t.get("error_code", 0) == 0}
        missing = [n for n in wanted if n not in existing]
        if missing and not settings.kafka_create_topics:
            raise RuntimeError(f"topic(s) {', '.join(missing)} missing, and CNSCHED_KAFKA_CREATE_TOPICS is false: "
                               "create them first")
        if missing:
            resp = await admin.create_topics(
                [NewTopic(n, intended[n], settings.replication_factor) for n in missing]
            )
            for name, code, *_ in resp.topic_errors:
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"cannot create topic {name}: Kafka error code {code}")
            log.info("created topics %s", ", ".join(f"{n} ({intended[n]})" for n in missing))
            for n in missing:
                existing[n] = intended[n]
        for n in wanted:
            if existing[n] != intended[n]:
                log.warning("topic %s has %d partitions, intended %d", n, existing[n], intended[n])
        return {n: existing[n] for n in wanted}
    finally:
        await admin.close()


def ensure_topics_sync(
    settings: Settings, names: tuple[str, ...] = ALL_TOPICS, exact: dict[str, int] | None = None
) -> dict[str, int]:
    return asyncio.run(ensure_topics(settings, names, exact))


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


def side_consumer(client_kwargs: dict, **kw) -> AIOKafkaConsumer:
    """A consumer beside the worker's own: no group, nothing committed, short fetch waits — it reads
    what it is assigned and seeks to (a gap read back, a partition's true end, the topics' ends)."""
    opts = {"group_id": None, "enable_auto_commit": False, "fetch_max_wait_ms": 100, **kw}
    return AIOKafkaConsumer(**client_kwargs, **opts)
