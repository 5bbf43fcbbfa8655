"""Issue 15: a worker outlives a restart of the broker. The embedded broker keeps topics in memory, so
it comes back empty; the worker notices (streams/worker/broker_watch.py), restarts itself in place,
creates the topics again, and window results flow again from the samples sent after the restart."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from schemas.probe import encode_arrow
from schemas.topics import NETSTATE_WINDOWS, PROBE_SAMPLES
from streams.config import Settings
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.broker import EmbeddedBroker, free_port
from streams.runtime.processes import start_worker, stop_process

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(os.environ.get("KAFKA_BOOTSTRAP")), reason="restarts its own embedded broker"),
]


def health(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


async def send_seconds(settings: Settings, seconds: float, tag: str) -> None:
    """Four paths, one sample each per 0.2 s at the current time (a fresh producer: its metadata is
    the broker's as it is now)."""
    p = producer(settings)
    await p.start()
    try:
        end = time.time() + seconds
        while time.time() < end:
            now = time.time()
            srcs = [f"{tag}{i}" for i in range(4)]
            payload = encode_arrow([now] * 4, srcs, [f"{tag}{(i + 1) % 4}" for i in range(4)], ["rtt_ms"] * 4,
                                   [1.0 + i for i in range(4)])
            await p.send_and_wait(settings.topic(PROBE_SAMPLES), payload, key=srcs[0].encode())
            await asyncio.sleep(0.2)
    finally:
        await p.stop()


async def windows_of(settings: Settings, prefix: str, wait_s: float) -> list[dict]:
    c = consumer(settings, enable_auto_commit=False)
    await c.start()
    out: list[dict] = []
    try:
        tp = TopicPartition(settings.topic(NETSTATE_WINDOWS), 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        end = time.monotonic() + wait_s
        while time.monotonic() < end and not out:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                out += [r for r in (json.loads(m.value) for m in msgs) if r["src"].startswith(prefix)]
    finally:
        await c.stop()
    return out


async def test_worker_rebuilds_after_the_broker_comes_back_empty(tmp_path):
    port = free_port()
    broker = EmbeddedBroker(port=port)
    bootstrap = broker.start()
    settings = Settings(kafka_bootstrap=bootstrap, topic_prefix="r.", app_id="cnsched-restart",
                        data_dir=tmp_path / "data", duckdb_path=tmp_path / "db.duckdb", web_port=free_port(),
                        window_seconds=2, window_step_seconds=2, allowed_lateness_seconds=1)
    await ensure_topics(settings)
    worker = start_worker(settings, Path(tmp_path / "w.log"))
    try:
        await send_seconds(settings, 20, "a")
        assert await windows_of(settings, "a", 20), "no window before the restart"
        pid = worker.pid
        broker.stop()
        await asyncio.sleep(3)
        broker = EmbeddedBroker(port=port)
        broker.start()
        # the worker notices within two checks, restarts in place, and recovers from empty changelogs
        deadline = time.monotonic() + 120
        sent_after = False
        got: list[dict] = []
        while time.monotonic() < deadline and not got:
            await send_seconds(settings, 5, "b")
            sent_after = True
            if health(settings.web_port) == 200:
                got = await windows_of(settings, "b", 5)
        log = (tmp_path / "w.log").read_text(errors="replace")
        assert sent_after and got, "no window from samples sent after the broker restart:\n" + log[-3000:]
        assert worker.poll() is None and worker.pid == pid  # restarted in place, not dead
        assert "the broker lost our topics" in log
        assert health(settings.web_port) == 200
    finally:
        stop_process(worker)
        broker.stop()
