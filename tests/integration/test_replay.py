"""Replaying old samples gives the window results that receiving them live gave."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest

from schemas.probe import encode_arrow
from schemas.topics import NETSTATE_WINDOWS, PROBE_SAMPLES
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process
from streams.worker.offline import window_stats_offline

pytestmark = pytest.mark.integration

SOURCES = ("n1", "n2", "n3")


async def run_worker(settings, messages, log, pace_s: float, expect: int):
    await ensure_topics(settings)
    worker = start_worker(settings, log)
    out = consumer(settings, NETSTATE_WINDOWS, group_id=None)
    await out.start()
    p = producer(settings)
    await p.start()
    got = []
    try:
        for src, payload in messages:
            await p.send_and_wait(settings.topic(PROBE_SAMPLES), payload, key=src.encode())
            if pace_s:
                await asyncio.sleep(pace_s)
        deadline = time.monotonic() + 60
        while len([r for r in got if r["metric"] == "rtt_ms"]) < expect and time.monotonic() < deadline:
            for _tp, msgs in (await out.getmany(timeout_ms=300)).items():
                got += [json.loads(m.value) for m in msgs]
    finally:
        await p.stop()
        await out.stop()
        stop_process(worker)
    return sorted((r for r in got if r["metric"] == "rtt_ms"), key=lambda r: (r["window_start"], r["src"], r["dst"]))


async def test_live_then_replayed_then_offline_give_the_same_windows(make_settings, tmp_path):
    rng = np.random.default_rng(8)
    start = time.time()
    # live: every 100 ms of wall clock, each source sends the samples of those 100 ms
    messages, all_rows = [], []
    seconds = 7.0
    steps = int(seconds * 10)
    for k in range(steps):
        for src in SOURCES:
            ts = start + k * 0.1 + np.sort(rng.uniform(0, 0.1, 50))
            v = rng.lognormal(0, 0.3, ts.size)
            v[rng.random(ts.size) < 0.02] = np.nan
            messages.append((src, encode_arrow(ts, [src] * ts.size, ["x"] * ts.size, ["rtt_ms"] * ts.size, v)))
            all_rows.append((src, ts, v))
    closers = [(src, encode_arrow([start + 60], [src], ["x"], ["closer"], [1.0])) for src in SOURCES]
    n_windows = len(SOURCES) * len({int(t // 2) for _, ts, _ in all_rows for t in (ts[0], ts[-1])})
    common = dict(window_seconds=2, window_step_seconds=2, allowed_lateness_seconds=0.5)

    live = await run_worker(make_settings(**common), messages + closers, tmp_path / "live.log",
                            pace_s=0.1 / len(SOURCES), expect=n_windows)
    replayed = await run_worker(make_settings(**common), messages + closers, tmp_path / "replay.log",
                                pace_s=0, expect=n_windows)
    ts = np.concatenate([r[1] for r in all_rows])
    v = np.concatenate([r[2] for r in all_rows])
    src = np.concatenate([[r[0]] * r[1].size for r in all_rows])
    offline, _ = window_stats_offline(encode_arrow(ts, src, ["x"] * ts.size, ["rtt_ms"] * ts.size, v), 2, 2, 0.5)
    offline = sorted(offline, key=lambda r: (r["window_start"], r["src"], r["dst"]))

    assert len(live) == n_windows
    assert sum(r["count"] for r in live) == ts.size

    def strip(rs):
        return [{k: (round(x, 9) if k == "mean" else x) for k, x in r.items()} for r in rs]

    assert strip(live) == strip(replayed) == strip(offline)
