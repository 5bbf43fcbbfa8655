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
