import asyncio
import json

import pytest

from schemas.topics import NETSTATE_WINDOWS
from sinks.duckdb_store import DuckStore
from streams.kafka import ensure_topics, producer
from streams.sink import WindowSink

pytestmark = pytest.mark.integration


async def test_sink_stores_each_window_once_under_redelivery(make_settings):
    settings = make_settings()
    await ensure_topics(settings)
    rows = [dict(src="a", dst="b", metric="rtt_ms", window_start=float(s), window_end=s + 10.0,
                 count=5, kept=5, outliers=0, lost=0, mean=1.0, p50=1.0, p95=1.0, p99=1.0,
                 min=1.0, max=1.0) for s in range(0, 100, 10)]
    p = producer(settings)
    await p.start()
    for r in rows + rows[:4]:  # the first four delivered twice
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(r).encode(), key=b"k")
    await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), b"not json", key=b"k")
    await p.stop()

    sink = WindowSink(settings)
    task = asyncio.create_task(sink.run())
    for _ in range(240):
        await asyncio.sleep(0.25)
        if task.done() or sink.messages >= len(rows) + 5:
            break
    sink.stop.set()
    assert await task == 0
    assert (sink.messages, sink.stored, sink.skipped) == (15, 10, 1)
    store = DuckStore(settings.duckdb_path)
    assert store.query("SELECT count(*), count(DISTINCT window_start) FROM windows") == [(10, 10)]
    store.close()
