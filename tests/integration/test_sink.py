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
    settings = make_settings()
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
