"""Noticing that the broker lost our topics, and starting over.

A broker that restarts with memory storage (the embedded one) comes back empty; a topic can also be
deleted under us. Faust's clients then loop on ``UnknownTopicOrPartition`` and offsets above the
highwater, forever. Kafka never moves a partition's end offset backwards and never drops a topic by
itself, so either seen twice in a row means what we had is gone. The worker then says so on
``/health`` and restarts in place (``cnsched worker`` re-executes itself): it creates the topics
again with their partition counts, recovers its tables from what the changelogs still hold (nothing,
after a memory broker's restart) and rebuilds the network view from the next windows. A broker that is
only unreachable changes nothing here: no answer is no evidence.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from streams.kafka import side_consumer
from streams.runtime.faust_patches import AFTER_BROKER_LOSS_ENV

log = logging.getLogger(__name__)
CHECK_INTERVAL_S = 5.0
CHECK_TIMEOUT_S = 5.0
CONFIRM_CHECKS = 2


def losses(seen_topics: set[str], highest: dict[TopicPartition, int], present: dict[str, int],
           ends: dict[TopicPartition, int]) -> list[str]:
    """What a check shows was lost: topics seen before and absent now, partitions whose end offset
    is below the highest seen (``present``: topic -> partition count now; ``ends``: end offsets now)."""
    out = [f"topic {t} is gone" for t in sorted(seen_topics - present.keys())]
    for tp, end in sorted(ends.items()):
        if end < highest.get(tp, 0):
            out.append(f"{tp.topic}[{tp.partition}] ends at {end}, below {highest[tp]} seen before")
    return out


class BrokerWatch:
    """One check per call of :meth:`check`; ``on_lost(reason)`` once the loss is confirmed."""

    def __init__(self, client_kwargs: dict, topics: list[str], on_lost: Callable[[str], None]) -> None:
        self.client_kwargs = client_kwargs
        self.topics = list(topics)
        self.on_lost = on_lost
        self.seen: set[str] = set()
        self.highest: dict[TopicPartition, int] = {}
        self.suspect = 0
        self.lost: str | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def check(self) -> None:
        if self.lost is not None:
            return
        try:
            present, ends = await asyncio.wait_for(self._read(), CHECK_TIMEOUT_S)
        except Exception as exc:  # unreachable or answering errors: no evidence either way
            log.debug("broker check skipped: %s", exc)
            return
        found = losses(self.seen, self.highest, present, ends)
        if not found:
            self.suspect = 0
            self.seen |= present.keys()
            for tp, end in ends.items():
                self.highest[tp] = max(end, self.highest.get(tp, 0))
            return
        self.suspect += 1
        if self.suspect >= CONFIRM_CHECKS:
            self.lost = "; ".join(found[:5]) + (f" (and {len(found) - 5} more)" if len(found) > 5 else "")
            self.on_lost(self.lost)

    async def _read(self) -> tuple[dict[str, int], dict[TopicPartition, int]]:
        if self._consumer is None:
            self._consumer = side_consumer(self.client_kwargs)
            await self._consumer.start()
        cluster = await self._consumer._client.fetch_all_metadata()
        parts = {t: sorted(cluster.partitions_for_topic(t) or ()) for t in self.topics}
        present = {t: len(ps) for t, ps in parts.items() if ps}
        tps = [TopicPartition(t, p) for t, ps in parts.items() for p in ps]
        ends = await self._consumer.end_offsets(tps) if tps else {}
        return present, ends

    async def stop(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()


def restart_in_place(reason: str) -> None:
    """Re-execute this ``cnsched`` command (same pid, arguments and environment)."""
    log.error("the broker lost our topics (%s): restarting this worker to rebuild its state", reason)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[AFTER_BROKER_LOSS_ENV] = "1"  # the changelogs may hold offsets with nothing behind them
    os.execv(sys.executable, [sys.executable, "-m", "streams.cli", *sys.argv[1:]])
