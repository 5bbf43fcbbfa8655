"""`cnsched sink`: the single DuckDB writer. Consumes netstate.windows in batches, writes them
through Arrow, commits offsets only after the write (at-least-once; the store is idempotent)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal

from schemas.topics import NETSTATE_WINDOWS
from sinks.duckdb_store import DuckStore
from streams.config import Settings
from streams.kafka import consumer

log = logging.getLogger(__name__)


class WindowSink:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.messages = 0  # read from Kafka, duplicates and bad ones included
        self.stored = 0  # new rows in DuckDB
        self.skipped = 0  # undecodable
        self.stop = asyncio.Event()

    async def run(self) -> int:
        store = DuckStore(self.settings.duckdb_path)
        c = consumer(self.settings, NETSTATE_WINDOWS,
                     group_id=f"{self.settings.app_id}-duckdb-sink",
                     enable_auto_commit=False, max_poll_records=50_000)
        await c.start()
        try:
            while not self.stop.is_set():
                batches = await c.getmany(timeout_ms=500, max_records=50_000)
                rows = []
                for msgs in batches.values():
                    for m in msgs:
                        try:
                            rows.append(json.loads(m.value))
                        except (ValueError, TypeError):
                            self.skipped += 1
                            log.warning("skipping undecodable window result at %s:%d@%d",
                                        m.topic, m.partition, m.offset)
                    self.messages += len(msgs)
                if rows:
                    self.stored += store.write_windows(rows)
                if batches:
                    await c.commit()
        finally:
            await c.stop()
            store.close()
        log.info("sink stopped: %d messages read, %d new window results stored",
                 self.messages, self.stored)
        return 0


async def run_sink(settings: Settings) -> int:
    sink = WindowSink(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, sink.stop.set)
    return await sink.run()
