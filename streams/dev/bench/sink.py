"""`cnsched bench sink`: window results through Kafka into DuckDB by the real sink, beside the store
alone (bulk JSON -> Arrow -> DuckDB, no Kafka) and a row-by-row sink (one json.loads and one INSERT
per window result)."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

from schemas.topics import NETSTATE_WINDOWS
from sinks.duckdb_store import DuckStore
from streams.config import Settings
from streams.kafka import ensure_topics, producer
from streams.runtime.sink_runner import WindowSink


def window_messages(results: int) -> list[bytes]:
    return [json.dumps({"src": f"n{i % 1000}", "dst": f"n{(i * 7) % 1000}", "metric": "rtt_ms",
                        "window_start": float(i // 1000 * 10), "window_end": float(i // 1000 * 10 + 10),
                        "count": 100, "kept": 99, "outliers": 1, "lost": 0, "mean": 1.0, "p50": 1.0,
                        "p95": 2.0, "p99": 3.0, "min": 0.5, "max": 3.0}).encode() for i in range(results)]


async def _through_the_sink(s: Settings, msgs: list[bytes]) -> dict:
    """The messages on the topic first, then the real sink drains them."""
    await ensure_topics(s, (NETSTATE_WINDOWS,))
    p = producer(s, linger_ms=20)
    await p.start()
    futs = [await p.send(s.topic(NETSTATE_WINDOWS), m, key=b"k") for m in msgs]
    await asyncio.gather(*futs)
    await p.stop()
    sink = WindowSink(s)
    t = time.perf_counter()
    task = asyncio.create_task(sink.run())
    while sink.stored < len(msgs) and not task.done():
        await asyncio.sleep(0.05)
    done = time.perf_counter()
    sink.stop.set()
    await task
    return {"stored": sink.stored, "elapsed": done - t, "steady": done - (sink.first_batch_at or t)}


def _store_only(path: Path, msgs: list[bytes]) -> float:
    store = DuckStore(path)  # fresh file: every row is new
    t = time.perf_counter()
    for a in range(0, len(msgs), 50_000):
        store.write_windows_json(msgs[a:a + 50_000])
    seconds = time.perf_counter() - t
    store.close()
    return len(msgs) / seconds


def _row_by_row(path: Path, msgs: list[bytes]) -> float:
    store = DuckStore(path)
    cols = list(json.loads(msgs[0]))
    sql = f"INSERT OR IGNORE INTO windows ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    t = time.perf_counter()
    for m in msgs:
        d = json.loads(m)
        store.con.execute(sql, [d[k] for k in cols])
    seconds = time.perf_counter() - t
    store.close()
    return len(msgs) / seconds


async def bench_sink(settings: Settings, results: int = 500_000) -> dict:
    run = uuid.uuid4().hex[:6]
    workdir = Path(tempfile.mkdtemp(prefix="cnsched-bench-sink-"))
    s = settings.model_copy(update={"topic_prefix": f"{settings.topic_prefix}benchsink{run}.",
                                    "app_id": f"{settings.app_id}-benchsink{run}",
                                    "duckdb_path": workdir / "sink.duckdb", "log_level": "WARNING"})
    msgs = window_messages(results)
    sink = await _through_the_sink(s, msgs)
    store_rate = _store_only(workdir / "store-only.duckdb", msgs)
    row_rate = _row_by_row(workdir / "row-by-row.duckdb", msgs[: min(results, 5_000)])  # subsample
    sink_rate = sink["stored"] / sink["steady"]
    return {"window_results": results, "stored": sink["stored"],
            # from the first batch received to the last row stored: how fast it keeps up
            "sink_results_per_s": sink_rate, "sink_seconds": sink["steady"],
            # from the sink's start (consumer group join included)
            "sink_results_per_s_with_startup": sink["stored"] / sink["elapsed"],
            "startup_seconds": sink["elapsed"] - sink["steady"],
            "store_only_results_per_s": store_rate,
            "baseline_row_by_row_results_per_s": row_rate,
            "ratio_sink_vs_row_by_row": sink_rate / row_rate}
