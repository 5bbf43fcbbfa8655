"""`cnsched sql` reads the DuckDB file while the sink keeps writing it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.topics import NETSTATE_WINDOWS
from streams.kafka import ensure_topics, producer
from streams.runtime.sink_runner import WindowSink

pytestmark = pytest.mark.integration


def sql(settings, query, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_DUCKDB_PATH"] = str(settings.duckdb_path)
    return subprocess.run([sys.executable, "-m", "streams.cli", "sql", query, *extra],
                          capture_output=True, text=True, env=env, timeout=60)


def window(start):
    return dict(src="a", dst="b", metric="rtt_ms", window_start=float(start), window_end=start + 10.0, count=5,
                kept=5, outliers=0, lost=0, mean=1.0, p50=1.0, p95=2.0, p99=2.0, min=1.0, max=2.0)


async def test_queries_while_the_sink_writes(make_settings):
    settings = make_settings(retention_every_seconds=0)  # its windows are of 1970: retention would roll them up
    await ensure_topics(settings)
    sink = WindowSink(settings)
    task = asyncio.create_task(sink.run())
    p = producer(settings)
    await p.start()
    seen = []
    try:
        for round_ in range(5):  # keep the sink busy while we query
            for k in range(200):
                await p.send(settings.topic(NETSTATE_WINDOWS), json.dumps(window(round_ * 2000 + k * 10)).encode(), key=b"k")
            await p.flush()
            r = await asyncio.to_thread(sql, settings, "SELECT count(*) AS n FROM windows", "--json")
            assert r.returncode == 0, r.stderr
            seen.append(json.loads(r.stdout)[0]["n"])
        for _ in range(100):
            if sink.messages >= 1000:
                break
            await asyncio.sleep(0.1)
    finally:
        await p.stop()
        sink.stop.set()
        await task
    assert seen == sorted(seen)  # reads see the table grow
    r = await asyncio.to_thread(sql, settings, "SELECT count(*) AS n, max(p95) AS worst FROM windows", "--csv")
    assert r.returncode == 0 and r.stdout.splitlines() == ["n,worst", "1000,2.0"]
    r = await asyncio.to_thread(sql, settings, "SELECT count(*) AS n, max(p95) AS worst, "
                                "max(window_end) AS window_end FROM windows")  # for a person: aligned
    assert r.returncode == 0 and r.stdout.splitlines() == [
        "   n  worst  window_end", "----  -----  ----------", "1000   2.00   10,000.00"], r.stdout  # 1970: no time
    bad = await asyncio.to_thread(sql, settings, "SELECT nope FROM windows")
    assert bad.returncode == 1 and bad.stderr.startswith("cnsched: sql: Binder Error")
    # the plain DuckDB CLI (duckdb-cli from PyPI, an older release than the library) reads the file too
    cli = Path(sys.executable).parent / "duckdb"
    r = subprocess.run([str(cli), "-readonly", "-csv", str(settings.duckdb_path), "-c",
                        "SELECT count(*) AS n, max(p95) AS worst FROM windows"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["n,worst", "1000,2.0"]
