"""Round trip through a real broker and a real Faust worker process: produce probe samples,
let the ingest agent window them, consume netstate.windows and probe.deadletter, compare."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import numpy as np
import pytest

from core.windowstats import window_stats_reference
from schemas.probe import encode_arrow
from schemas.topics import NETSTATE_WINDOWS, PROBE_DEADLETTER, PROBE_SAMPLES
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process

pytestmark = pytest.mark.integration


async def collect(settings, topics, want, timeout_s, worker):
    c = consumer(settings, *topics, group_id=None)
    await c.start()
    got: dict[str, list] = {t: [] for t in topics}
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not want(got) and worker.poll() is None:
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                name = tp.topic.removeprefix(settings.topic_prefix)
                got[name] += [json.loads(m.value) for m in msgs]
    finally:
        await c.stop()
    return got


async def test_samples_flow_through_kafka_and_faust_to_window_results(make_settings_both, tmp_path):
    """On the embedded broker and on librdkafka's mock cluster (a second Kafka implementation)."""
    settings = make_settings_both(window_seconds=10, window_step_seconds=10, allowed_lateness_seconds=1)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "worker.log")
    try:
        rng = np.random.default_rng(5)
        t0 = np.floor(time.time() / 10) * 10 - 60  # two whole windows a minute ago
        ts = t0 + np.sort(rng.uniform(0, 20, 3000))
        rtt = rng.lognormal(0, 0.2, ts.size)
        rtt[rng.random(ts.size) < 0.02] *= 50  # spikes
        rtt[[5, 500, 2500]] = np.nan  # lost probes
        mixed = await _produce(settings, t0, ts, rtt)

        def enough(got):
            return len(got[NETSTATE_WINDOWS]) >= 4 and len(got[PROBE_DEADLETTER]) >= 2

        got = await collect(settings, (NETSTATE_WINDOWS, PROBE_DEADLETTER), enough, 60, worker)
    finally:
        status = stop_process(worker)
    log = (tmp_path / "worker.log").read_text()
    assert enough(got), f"missing output; worker log tail:\n{log[-3000:]}"
    assert status == 0, log[-3000:]
    _check_windows(got, t0, ts, rtt)
    _check_dead_letters(got, settings, mixed)


async def _produce(settings, t0, ts, rtt) -> list[dict]:
    """Arrow batches of rtt, then a JSON array with bad rows, garbage, and a sample closing both windows."""
    p = producer(settings)
    await p.start()
    try:
        topic = settings.topic(PROBE_SAMPLES)
        for a in range(0, ts.size, 1000):  # Arrow batches
            sl = slice(a, a + 1000)
            n = ts[sl].size
            await p.send_and_wait(topic, encode_arrow(ts[sl], ["n01"] * n, ["n02"] * n,
                                                      ["rtt_ms"] * n, rtt[sl]), key=b"n01")
        # a JSON array with one bad row, a garbage message, and a sample that closes both windows
        mixed = [{"ts": t0 + 25, "src": "n01", "dst": "", "metric": "bw_util", "value": 0.25},
                 {"ts": t0 + 25, "src": "n01", "dst": "", "metric": "bw_util", "value": 7},
                 # facility power of site dc1 flows through the same windows (negative: rejected)
                 {"ts": t0 + 21, "src": "dc1", "dst": "", "metric": "power_mw", "value": 42.0},
                 {"ts": t0 + 22, "src": "dc1", "dst": "", "metric": "power_mw", "value": 44.0},
                 {"ts": t0 + 23, "src": "dc1", "dst": "", "metric": "power_mw", "value": -3.0}]
        await p.send_and_wait(topic, json.dumps(mixed).encode(), key=b"n01")
        await p.send_and_wait(topic, b"\xffgarbage", key=b"n01")
        closer = {"ts": t0 + 40, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": 1.0}
        await p.send_and_wait(topic, json.dumps(closer).encode(), key=b"n01")
    finally:
        await p.stop()
    return mixed


def _check_windows(got, t0, ts, rtt) -> None:
    windows = {(w["metric"], w["window_start"]): w for w in got[NETSTATE_WINDOWS]}
    for start in (t0, t0 + 10):
        w = windows[("rtt_ms", start)]
        inside = (ts >= start) & (ts < start + 10)
        expected = window_stats_reference(rtt[inside])
        assert w["window_end"] == start + 10
        assert (w["src"], w["dst"]) == ("n01", "n02")
        assert (w["count"], w["lost"]) == (expected["count"], expected["lost"])
        assert w["kept"] + w["outliers"] + w["lost"] == w["count"]
        assert abs(w["outliers"] - expected["outliers"]) <= 3
        assert w["mean"] == pytest.approx(expected["mean"], rel=0.005)
        for f in ("p50", "p95", "p99"):
            assert w[f] == pytest.approx(expected[f], rel=0.01), f
        assert w["min"] == expected["min"]
    assert windows[("rtt_ms", t0)]["lost"] + windows[("rtt_ms", t0 + 10)]["lost"] == 3
    assert windows[("rtt_ms", t0)]["outliers"] > 0  # the 50x spikes are gone
    bw = windows[("bw_util", t0 + 20)]
    assert (bw["count"], bw["mean"], bw["dst"]) == (1, 0.25, "")
    power = windows[("power_mw", t0 + 20)]
    assert (power["src"], power["count"], power["mean"], power["max"]) == ("dc1", 2, 43.0, 44.0)


def _check_dead_letters(got, settings, mixed) -> None:
    dead = {d["reason"]: d for d in got[PROBE_DEADLETTER]}
    assert base64.b64decode(dead["undecodable"]["original_b64"]) == b"\xffgarbage"
    assert dead["undecodable"]["source"]["topic"] == settings.topic(PROBE_SAMPLES)
    partial = dead["out_of_range"]
    assert (partial["rows_total"], partial["rows_rejected"]) == (5, 2)
    assert partial["rows"][0] == {"row": 1, "reason": "out_of_range", "detail": "bw_util must be in [0, 1], got 7.0"}
    assert partial["rows"][1]["row"] == 4 and "power_mw" in partial["rows"][1]["detail"]
    assert json.loads(base64.b64decode(partial["original_b64"])) == mixed


async def test_an_idle_partition_closes_its_windows_by_the_wall_clock(make_settings, tmp_path):
    settings = make_settings(window_seconds=10, window_step_seconds=10, allowed_lateness_seconds=1,
                             idle_close_seconds=2)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "worker.log")
    try:
        now = time.time()
        t0 = np.floor(now / 10) * 10  # the window open now; its end is up to 10 s away
        ts = np.linspace(t0, now, 50)
        p = producer(settings)
        await p.start()
        try:
            await p.send_and_wait(settings.topic(PROBE_SAMPLES), encode_arrow(
                ts, ["n01"] * 50, ["n02"] * 50, ["rtt_ms"] * 50, np.full(50, 2.0)), key=b"n01")
        finally:
            await p.stop()
        # nothing else is sent: only the idle rule can close the window
        got = await collect(settings, (NETSTATE_WINDOWS,), lambda g: len(g[NETSTATE_WINDOWS]) >= 1, 40, worker)
    finally:
        stop_process(worker)
    (w,) = got[NETSTATE_WINDOWS]
    assert (w["window_start"], w["count"], w["mean"]) == (t0, 50, 2.0)


async def test_worker_serves_metrics_with_per_reason_counters(make_settings, tmp_path):
    import urllib.request

    settings = make_settings()
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "worker.log")
    try:
        p = producer(settings)
        await p.start()
        topic = settings.topic(PROBE_SAMPLES)
        await p.send_and_wait(topic, b"nope", key=b"x")
        t0 = np.floor(time.time() / 10) * 10 - 100
        for ts in (t0 + 1, t0 + 30, t0 + 2):  # the third arrives after its window closed: late
            doc = {"ts": ts, "src": "x", "dst": "y", "metric": "rtt_ms", "value": 1.0}
            await p.send_and_wait(topic, json.dumps(doc).encode(), key=b"x")
        await p.stop()
        url = f"http://127.0.0.1:{settings.web_port}/metrics"
        deadline = time.monotonic() + 60
        body = ""
        while time.monotonic() < deadline:
            try:
                body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=2).read().decode())
                if ('messages_rejected_total{reason="undecodable"} 1' in body
                        and 'samples_late_total{reason="window_closed"} 1' in body):
                    break
            except OSError:
                pass
            await asyncio.sleep(0.5)
    finally:
        stop_process(worker)
    assert 'cnsched_messages_rejected_total{reason="undecodable"} 1' in body, body
    assert 'cnsched_samples_late_total{reason="window_closed"} 1' in body, body
    assert "cnsched_samples_accepted_total 3" in body
    assert "# TYPE cnsched_messages_total counter" in body
    # histograms: three one-sample messages decoded (the undecodable one never was), each in the
    # bucket le="1"; every window result was sent 60 s or more after its end
    assert "# TYPE cnsched_ingest_batch_samples histogram" in body
    assert 'cnsched_ingest_batch_samples_bucket{le="1.0"} 3.0' in body, body
    assert "cnsched_ingest_batch_samples_count 3.0" in body
    lag = [ln for ln in body.splitlines() if ln.startswith('cnsched_window_result_lag_seconds_bucket{le="30.0"}')]
    assert lag == ['cnsched_window_result_lag_seconds_bucket{le="30.0"} 0.0'], lag
