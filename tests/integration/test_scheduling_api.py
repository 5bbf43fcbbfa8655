"""Placement decisions and a migration, end to end against a live worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas.topics import (
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    SCHED_DEADLETTER,
    SCHED_EVENTS,
    SCHED_RESCHEDULES,
    SCHED_TASKS,
)
from sinks.duckdb_store import DuckStore
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.history import windows
from tests.helpers.http import call

pytestmark = pytest.mark.integration


def cli(settings, *args, stdin=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_WEB_PORT"] = str(settings.web_port)
    return subprocess.run([sys.executable, "-m", "streams.cli", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=120)


def rtt_window(src, dst, end, p50, p95, lost=0):
    return dict(src=src, dst=dst, metric="rtt_ms", window_start=end - 10, window_end=end, count=100,
                kept=100 - lost, outliers=0, lost=lost, mean=p50, p50=p50, p95=p95, p99=p95, min=p50, max=p95)


def report(node, cards, fp16, now):
    return {"node": node, "ts": now, "accel_class": "gpu" if cards else "", "cards": cards,
            "peak_tflops": {"fp16": fp16, "int8": 2 * fp16, "fp32": fp16 / 10}, "mem_gb": 80 if cards else 0,
            "mem_bw_gbs": 3000 if cards else 0, "host_mem_gb": 1024, "host_mem_bw_gbs": 300,
            "intra_bw_gbps": 7200 if cards else 0, "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5,
            "queue_delay_s": 0}


async def test_decisions_and_a_migration_when_the_path_degrades(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    _store_history(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    now = time.time()
    try:
        await _seed_and_wait(settings, now)
        await _decisions(settings.web_port)
        await _migration_when_the_path_degrades(settings, now, tmp_path)
        await _forecasts_and_power(settings)
        await _lifecycle_releases_cards(settings, now)
    finally:
        stop_process(worker)


def _store_history(settings) -> None:
    with DuckStore(settings.duckdb_path) as store:  # history for the forecast endpoint
        store.write_windows(windows("A", "store", 3) + windows("B", "store", 1) + windows("A", "", 3))
        # site dc1's facility power, one window per minute: 10, 20, (no window), 10 MW
        store.write_windows([{**w, "metric": "power_mw", "src": "dc1", "dst": "", "mean": mw}
                             for w, mw in zip(windows("x", "", 1)[:4], (10.0, 20.0, None, 10.0), strict=True)
                             if mw is not None])


async def _seed_and_wait(settings, now: float) -> None:
    """Three nodes (C without cards), A's path to the data slow, B's fast, one broken task."""
    port = settings.web_port
    p = producer(settings)
    await p.start()
    for r in (report("A", 8, 2000, now), report("B", 8, 1000, now), report("C", 0, 0, now)):
        await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
    for w in (rtt_window("A", "store", now, 199.9, 200.0), rtt_window("B", "store", now, 0.95, 1.0)):
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(w).encode(), key=b"k")
    await p.send_and_wait(settings.topic(SCHED_TASKS), b'{"id": "broken"', key=b"broken")
    await p.stop()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            s, body = await asyncio.to_thread(call, port, "GET", "/compute/nodes")
            s2, _ = await asyncio.to_thread(call, port, "GET", "/network/paths/B/store")
            if s == 200 and body["total"] == 3 and s2 == 200:
                break
        except OSError:
            pass
        await asyncio.sleep(0.3)



async def _decisions(port: int) -> None:
    # a task that reads from the store all along says how much the network weighs for it (alpha 0.2; left
    # to the rule, a one-node training task that loads nothing is scored by compute alone)
    dp = {"id": "t1", "type": "training-data-parallel", "resources": {"cards": 4}, "alpha": 0.2,
          "data_source": {"node": "store", "size_gb": 0}, "checkpoint_gb": 1, "expected_duration_s": 7200}
    status, body = await asyncio.to_thread(call, port, "POST", "/tasks", dp)
    assert status == 200, body
    d = body["decision"]
    # it prefers B's 1 ms path to the data over A's compute
    assert body["nodes"] == ["B"] and d["alpha"] == 0.2 and d["network_profile"] == "bandwidth"
    assert [c["node"] for c in d["candidates"]] == ["B", "A"]
    assert d["compute_only_nodes"] == ["A"]  # what alpha = 1 would have chosen
    assert d["rejected"] == {"C": "insufficient_cards"}
    top = d["candidates"][0]
    assert top["composite"] == pytest.approx(0.2 * top["compute_score"] + 0.8 * top["network_score"], abs=1e-3)

    inf = {"id": "t2", "type": "inference", "resources": {"cards": 1}}
    status, body = await asyncio.to_thread(call, port, "POST", "/tasks", inf)
    assert status == 200 and body["nodes"] == ["A"] and body["decision"]["alpha"] == 0.8

    big = {"id": "t3", "type": "training-model-parallel", "resources": {"cards": 64}}
    status, body = await asyncio.to_thread(call, port, "POST", "/tasks", big)
    # no node has 64 cards: turned away at once, not queued for a day (issue 28)
    assert status == 409 and body["fields"] == [{"field": "resources.cards",
                                                 "reason": "no node has 64 cards; the largest has 8"}], body

    status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {"id": "t4", "type": "gaming", "alpha": 1.5})
    assert status == 422 and {f["field"] for f in body["fields"]} == {"type", "alpha"}



async def _migration_when_the_path_degrades(settings, now: float, tmp_path) -> None:
    port = settings.web_port
    # B's path to the data degrades: latency x250, 5 % loss -> t1 moves to A
    out = consumer(settings, SCHED_RESCHEDULES, SCHED_DEADLETTER, group_id=None)
    await out.start()
    p = producer(settings)
    await p.start()
    await p.send_and_wait(settings.topic(NETSTATE_WINDOWS),
                          json.dumps(rtt_window("B", "store", now + 10, 240.0, 250.0, lost=5)).encode(), key=b"k")
    await p.stop()
    events, dead = [], []
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:
        for tp, msgs in (await out.getmany(timeout_ms=500)).items():
            target = dead if tp.topic.endswith(SCHED_DEADLETTER) else events
            target += [json.loads(m.value) for m in msgs]
    await out.stop()
    assert events, (tmp_path / "w.log").read_text()[-3000:]
    ev = events[0]
    assert (ev["task_id"], ev["from_nodes"], ev["to_nodes"], ev["trigger"]) == ("t1", ["B"], ["A"], "degradation")
    assert ev["expected_gain_s"] > ev["migration_cost_s"] > 60  # save 30 + restore 30 + transfer
    assert ev["after"]["composite"] > ev["before"]["composite"]
    assert dead and dead[0]["source"]["topic"] == settings.topic(SCHED_TASKS)

    status, rec = await asyncio.to_thread(call, port, "GET", "/tasks/t1")
    assert status == 200 and rec["nodes"] == ["A"] and rec["status"] == "placed"
    assert [next(iter(h)) for h in rec["history"]] == ["decision", "reschedule"]
    assert (await asyncio.to_thread(call, port, "GET", "/tasks/nope"))[0] == 404



async def _forecasts_and_power(settings) -> None:
    port = settings.web_port
    # forecasts from the DuckDB history: 200 with the horizon's points, 409 with too little
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/A/store?metric=rtt_ms&horizon=30m")
    assert status == 200, f
    assert len(f["points"]) == 30 and f["step_s"] == 60 and f["history_steps"] == 3 * 1440
    assert all(0.4 < p["value"] < 1.6 for p in f["points"])  # the series swings 0.5 .. 1.5
    # battery sizing from the stored power: the gap at minute 3 is interpolated (15 MW), so the
    # load is 10, 20, 15, 10: blocks of 2 -> targets 15, 12.5; compensation -5, 5, 2.5, -2.5
    status, b = await asyncio.to_thread(call, port, "GET", "/power/dc1/smoothing?window=2min&interval=1min")
    assert status == 200, b
    assert (b["samples"], b["gaps_filled"]) == (4, 1) and b["compensation_mw"] == [-5, 5, 2.5, -2.5]
    assert b["power_capacity_mw"] == pytest.approx(6) and b["smoothing_rate_pct"] == pytest.approx(75)
    assert (await asyncio.to_thread(call, port, "GET", "/power/nowhere/smoothing"))[0] == 404
    status, b = await asyncio.to_thread(call, port, "GET", "/power/dc1/smoothing?window=10")
    assert status == 409 and b["have_samples"] == 4
    status, b = await asyncio.to_thread(call, port, "GET", "/power/dc1/smoothing?window=2&dod=2&trailing=maybe")
    assert status == 400 and {f["field"] for f in b["fields"]} == {"dod", "trailing"}
    # the same through the CLI
    q = await asyncio.to_thread(cli, settings, "query", "forecast", "A", "store", "--horizon", "10m", "--json")
    assert q.returncode == 0 and len(json.loads(q.stdout)["points"]) == 10
    # with ?history=: the newest 2 h of the 1-minute series (gaps left out) before the forecast
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/A/store?horizon=30m&history=2h")
    assert status == 200 and 100 <= len(f["history"]) <= 120 and f["history"][-1]["t"] < f["points"][0]["t"]
    png = Path(settings.data_dir) / "forecast.png"
    q = await asyncio.to_thread(cli, settings, "query", "forecast", "A", "store", "--horizon", "30m", "--plot",
                                str(png), "--json")
    assert q.returncode == 0 and json.loads(q.stdout)["forecast_points"] == 30, q.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    q = await asyncio.to_thread(cli, settings, "query", "node", "nope")
    assert q.returncode == 1 and q.stderr.strip() == "cnsched: query: HTTP 404: unknown node"
    q = await asyncio.to_thread(cli, settings, "query", "power", "dc1", "--window", "2min", "--dod", "7")
    assert q.returncode == 1 and "dod: must be in (0, 1]" in q.stderr
    status, fn = await asyncio.to_thread(call, port, "GET", "/forecast/nodes/A?metric=rtt_ms&horizon=2h&step=2m")
    assert status == 200 and fn["node"] == "A" and len(fn["points"]) == 60 and fn["step_s"] == 120
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/B/store?horizon=1h")
    assert status == 200 and not f["seasonal"]  # one day of history: the level and its band
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/B/store?horizon=1d")
    assert status == 409 and (f["needed_steps"], f["have_steps"]) == (1470, 1440)  # 30 + a day of steps
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/A/store?horizon=1.5m&stat=p42")
    assert status == 400 and {x["field"] for x in f["fields"]} == {"horizon", "stat"}
    status, f = await asyncio.to_thread(call, port, "GET", "/forecast/paths/A/store?step=7s")
    assert status == 400 and f["fields"][0]["field"] == "step" and "divide a day" in f["fields"][0]["reason"]



async def _lifecycle_releases_cards(settings, now: float) -> None:
    port = settings.web_port
    # lifecycle: a finished task releases its cards, and a queued task takes them
    six = {"type": "fine-tune", "resources": {"cards": 6}}
    sub = await asyncio.to_thread(cli, settings, "submit", "-", stdin=json.dumps([{"id": "t5", **six},
                                                                                {"id": "bad", "type": "x"}]))
    assert sub.returncode == 1, sub.stderr  # one task rejected
    lines = sub.stdout.splitlines()
    assert lines[0].startswith("t5 placed on B (alpha 1.00")  # one node, loads nothing: compute alone
    assert lines[1].startswith("bad rejected: type:")
    status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {"id": "t6", **six})
    assert status == 200 and body["status"] == "queued"  # A has 3 cards left, B 2
    p = producer(settings)
    await p.start()
    await p.send_and_wait(settings.topic(SCHED_EVENTS), b'{"task_id": "t5", "event": "exploded"}', key=b"t5")
    for ev in ({"task_id": "t5", "event": "started", "at": now + 1, "nodes": ["B"]},
               {"task_id": "t5", "event": "finished", "at": now + 2, "nodes": ["B"], "duration_s": 1.0,
                "throughput": 10.0}):
        await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(ev).encode(), key=b"t5")
    await p.stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, rec6 = await asyncio.to_thread(call, port, "GET", "/tasks/t6")
        if rec6["status"] == "placed":
            break
        await asyncio.sleep(0.3)
    assert rec6["status"] == "placed" and rec6["nodes"] == ["B"]
    _, rec5 = await asyncio.to_thread(call, port, "GET", "/tasks/t5")
    assert rec5["status"] == "finished" and rec5["running"] is None
    assert [h["event"]["event"] for h in rec5["history"] if "event" in h] == ["started", "finished"]
    out = consumer(settings, SCHED_DEADLETTER, group_id=None)
    await out.start()
    dead = []
    deadline = time.monotonic() + 20
    while not any(d["detail"].startswith("task event") for d in dead) and time.monotonic() < deadline:
        for msgs in (await out.getmany(timeout_ms=500)).values():
            dead += [json.loads(m.value) for m in msgs]
    await out.stop()
    assert any(d["detail"].startswith("task event") and d["source"]["topic"] == settings.topic(SCHED_EVENTS)
               for d in dead)
