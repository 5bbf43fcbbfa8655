"""Issue 51, finding 5: what runs tasks, tried by hand. `cnsched event TASK started|finished|...` sends
a runner's event on sched.events (what the Slurm bridge and the demo's runner send) through the real
broker, and the worker acts on it; `node-agent --once` prints the report it would send and sends
nothing unless asked (it needs no broker at all)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from streams.kafka import ensure_topics
from streams.runtime.processes import settings_env, start_worker, stop_process
from tests.helpers.http import call, wait_nodes
from tests.helpers.scheduling import gpu_node, send_reports

pytestmark = pytest.mark.integration


def cnsched(settings, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streams.cli", *argv], capture_output=True, text=True, timeout=60,
                          env=settings_env(settings))


async def until_status(port: int, tid: str, status: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, rec = await asyncio.to_thread(call, port, "GET", f"/tasks/{tid}")
        if rec.get("status") == status:
            return rec
        await asyncio.sleep(0.3)
    raise AssertionError(f"{tid} never {status}: {rec}")


async def test_events_sent_by_hand_start_and_finish_a_task(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        await send_reports(settings, [gpu_node("n1", time.time())])
        await wait_nodes(port, 1)
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "h1", "type": "fine-tune", "resources": {"cards": 2}})
        assert status in (200, 202), body
        await until_status(port, "h1", "placed")
        run = await asyncio.to_thread(cnsched, settings, "event", "h1", "started", "--nodes", "n1")
        assert run.returncode == 0 and json.loads(run.stdout)["event"] == "started", run.stderr
        await until_status(port, "h1", "running")
        run = await asyncio.to_thread(cnsched, settings, "event", "h1", "finished", "--duration", "90")
        assert run.returncode == 2 and "has no unit" in run.stderr  # seconds or minutes? refused
        run = await asyncio.to_thread(cnsched, settings, "event", "h1", "finished", "--duration", "90s",
                                      "--throughput", "120")
        assert run.returncode == 0, run.stderr
        rec = await until_status(port, "h1", "finished")
        ev = rec["history"][-1]["event"]
        assert (ev["event"], ev["duration_s"], ev["throughput"]) == ("finished", 90.0, 120.0)
    finally:
        stop_process(worker)


async def test_a_workloads_reported_rates_send_its_next_task_to_the_card_it_runs_faster_on(make_settings, tmp_path):
    """The worker learns a workload's card speeds from the throughput its runners report on finished
    events (core.speeds): a workload that ran at half the rate on the H100 goes to the A100 next, while
    another workload still takes the H100 the metering calls 1.5x."""
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        now = time.time()
        await send_reports(settings, [gpu_node("h", now, fp16=1500.0, accel_model="H100"),
                                      gpu_node("a", now, fp16=1000.0, accel_model="A100")])
        await wait_nodes(port, 2)
        placed = {}
        for tid in ("r1", "r2"):
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
                "id": tid, "type": "fine-tune", "resources": {"cards": 8}, "workload": "ncf"})
            assert status in (200, 202), body
            placed[tid] = (await until_status(port, tid, "placed"))["nodes"]
        assert placed == {"r1": ["h"], "r2": ["a"]}  # nothing measured: the faster card by the metering first
        for tid, node, rate in (("r1", "h", "23.3"), ("r2", "a", "48.9")):
            for ev in (["started", "--nodes", node], ["finished", "--duration", "600s", "--throughput", rate]):
                run = await asyncio.to_thread(cnsched, settings, "event", tid, *ev)
                assert run.returncode == 0, run.stderr
            await until_status(port, tid, "finished")
        for tid, workload, node in (("r3", "ncf", "a"), ("r4", "bert", "h")):
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
                "id": tid, "type": "fine-tune", "resources": {"cards": 8}, "workload": workload})
            assert status in (200, 202), body
            assert (await until_status(port, tid, "placed"))["nodes"] == [node], tid
    finally:
        stop_process(worker)


def test_node_agent_once_prints_its_report_and_sends_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_") and k != "KAFKA_BOOTSTRAP"}
    r = subprocess.run([sys.executable, "-m", "streams.cli", "node-agent", "--node", "a1", "--cards", "8",
                        "--accel-class", "h100", "--address", "10.0.0.7", "--nvidia-smi", str(tmp_path / "none"),
                        "--once"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr  # no KAFKA_BOOTSTRAP: nothing could have been sent
    rep = json.loads(r.stdout)
    assert (rep["node"], rep["cards"], rep["accel_class"], rep["address"]) == ("a1", 8, "h100", "10.0.0.7")
    r = subprocess.run([sys.executable, "-m", "streams.cli", "node-agent", "--node", "a1", "--cards", "8",
                        "--address", "not a host", "--nvidia-smi", str(tmp_path / "none"), "--once"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "refused: address: String should match" in r.stderr
    r = subprocess.run([sys.executable, "-m", "streams.cli", "node-agent", "--node", "a1", "--cards", "8",
                        "--nvidia-smi", str(tmp_path / "none"), "--once", "--send"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "KAFKA_BOOTSTRAP is not set" in r.stderr  # asked to send: it needs the broker
