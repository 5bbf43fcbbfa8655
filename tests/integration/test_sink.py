import asyncio
import json

import pytest

from schemas.topics import (
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    SCHED_DECISIONS,
    SCHED_EVENTS,
    SCHED_RESCHEDULES,
)
from sinks.duckdb_store import DuckStore
from streams.kafka import ensure_topics, producer
from streams.runtime.sink_runner import WindowSink
from tests.helpers.audit import decision

pytestmark = pytest.mark.integration


async def test_sink_stores_each_message_once_under_redelivery(make_settings):
    settings = make_settings(retention_every_seconds=0)  # its windows are of 1970: retention would roll them up
    await ensure_topics(settings)
    rows = [dict(src="a", dst="b", metric="rtt_ms", window_start=float(s), window_end=s + 10.0,
                 count=5, kept=5, outliers=0, lost=0, mean=1.0, p50=1.0, p95=1.0, p99=1.0,
                 min=1.0, max=1.0) for s in range(0, 100, 10)]
    move = {"task_id": "t1", "at": 50.0, "from_nodes": ["n1"], "to_nodes": ["n2"], "trigger": "degradation",
            "expected_gain_s": 900.0, "migration_cost_s": 60.0,
            "before": {"compute_score": 50.0, "network_score": 20.0, "composite": 30.0},
            "after": {"compute_score": 50.0, "network_score": 80.0, "composite": 70.0}, "state_version": 9}
    p = producer(settings)
    await p.start()
    sent = 0
    for r in rows + rows[:4]:  # the first four delivered twice
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(r).encode(), key=b"k")
        sent += 1
    await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), b"not json", key=b"k")
    for d in (decision("t1", 10.0), decision("t1", 10.0), decision("t2", 12.0, ()), {"task_id": "broken"}):
        await p.send_and_wait(settings.topic(SCHED_DECISIONS), json.dumps(d).encode(), key=b"t")
    for m in (move, move):
        await p.send_and_wait(settings.topic(SCHED_RESCHEDULES), json.dumps(m).encode(), key=b"t")
    # poison that crash-looped the sink before it checked contracts (issue 15)
    report = {"node": "n1", "ts": 100.0, "cards": 8, "free": {"cards": 3}}
    poison = [(COMPUTE_NODES, json.dumps(report).encode()),
              (COMPUTE_NODES, json.dumps({**report, "ts": 101.0, "free": {"cards": 10**30}}).encode()),
              (COMPUTE_NODES, b"[" * 100_000 + b"]" * 100_000),
              (SCHED_EVENTS, json.dumps({"task_id": "t1", "event": "started", "at": 11.0}).encode()),
              (SCHED_EVENTS, json.dumps({"task_id": "t1\x1f", "event": "started", "at": 11.0}).encode())]
    for topic, value in poison:
        await p.send_and_wait(settings.topic(topic), value, key=b"p")
    await p.stop()
    total = sent + 1 + 4 + 2 + len(poison)

    sink = WindowSink(settings)
    task = asyncio.create_task(sink.run())
    for _ in range(240):
        await asyncio.sleep(0.25)
        if task.done() or sink.messages >= total:
            break
    sink.stop.set()
    assert await task == 0
    # 10 windows + 2 decisions + 1 migration + 1 report + 1 event stored; the garbage window, the
    # broken decision, the report with 1e30 free cards, the nested array and the bad task id rejected
    assert (sink.messages, sink.stored, sink.skipped) == (total, 15, 5)
    store = DuckStore(settings.duckdb_path)
    rejects = store.query("SELECT topic, reason, octet_length(original), original_size FROM sink_rejects "
                          "ORDER BY topic, \"offset\"")
    assert [(t.removeprefix(settings.topic_prefix), r) for t, r, _, _ in rejects] == [
        (COMPUTE_NODES, "schema"), (COMPUTE_NODES, "undecodable"), (NETSTATE_WINDOWS, "schema"),
        (SCHED_DECISIONS, "schema"), (SCHED_EVENTS, "schema")]
    assert rejects[1][2:] == (settings.sink_reject_bytes, 200_000)  # the head of the original, and its size
    assert store.query("SELECT free_cards FROM compute_reports") == [(3,)]
    assert store.query("SELECT count(*), count(DISTINCT window_start) FROM windows") == [(10, 10)]
    assert store.query("SELECT count(*) FROM decisions") == [(2,)]
    assert store.query("SELECT count(*) FROM reschedules") == [(1,)]
    store.close()


async def test_the_sink_applies_the_retention(make_settings):
    # windows of 8 days ago (raw is kept 7) become one row a minute; this minute's stay raw
    import time

    settings = make_settings()
    await ensure_topics(settings)
    now = time.time()
    old, new = 60 * (int(now - 8 * 86_400) // 60), 60 * (int(now) // 60) - 120
    rows = [dict(src="a", dst="b", metric="rtt_ms", window_start=float(t0 + k * 10), window_end=t0 + k * 10 + 10.0,
                 count=5, kept=5, outliers=0, lost=0, mean=float(k), p50=1.0, p95=1.0, p99=1.0, min=1.0, max=1.0)
            for t0 in (old, new) for k in range(12)]  # two minutes of 10-s windows at each time
    p = producer(settings)
    await p.start()
    for r in rows:
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(r).encode(), key=b"k")
    await p.stop()
    sink = WindowSink(settings)
    task = asyncio.create_task(sink.run())
    for _ in range(240):
        await asyncio.sleep(0.25)
        if sink.messages >= len(rows):
            break
    sink.stop.set()
    assert await task == 0
    # the pass removed rows: the file was copied fresh and put in place (what follows reads the copy)
    assert sink.copied_bytes == settings.duckdb_path.stat().st_size
    assert not settings.duckdb_path.with_name(settings.duckdb_path.name + ".fresh").exists()
    with DuckStore(settings.duckdb_path, read_only=True) as store:
        got = store.query("SELECT window_start, window_end - window_start, kept, mean FROM windows "
                          "WHERE window_start < $t ORDER BY 1", {"t": now - 86_400})
        assert got == [(float(old), 60.0, 30, 2.5), (old + 60.0, 60.0, 30, 8.5)]  # means 0..5 and 6..11
        assert store.query("SELECT count(*) FROM windows WHERE window_start >= $t", {"t": now - 86_400}) == [(12,)]
