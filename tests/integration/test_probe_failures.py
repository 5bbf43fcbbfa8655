"""Issue 51, finding 1, end to end: real probe agents (`cnsched probe`, UDP on loopback) brought up one
by one 12 s apart beside placed, running tasks stop nothing (a starting agent's probes to peers whose
agents are not up yet are no evidence); then one node's probes really go dark (its agent stopped with
SIGSTOP: it neither answers nor sends) while its compute reports go on, and the incident opens (cause
network, seen by both peers) and its task moves within the seed's minute."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time

import pytest

from schemas.topics import COMPUTE_NODES, SCHED_EVENTS, SCHED_INCIDENTS, SCHED_RESCHEDULES
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.broker import free_port
from streams.runtime.processes import start_command, start_worker, stop_process
from tests.helpers.http import call, wait_nodes
from tests.helpers.scheduling import gpu_node

pytestmark = pytest.mark.integration

NODES = ("a1", "a2", "a3")


async def _report_forever(p, settings, stop: asyncio.Event) -> None:
    """Every node's compute report every 2 s (as a node agent sends them), until ``stop``."""
    while not stop.is_set():
        for n in NODES:
            r = {k: v for k, v in gpu_node(n, time.time(), accel_class="h100").items() if k != "received_at"}
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=n.encode())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 2.0)


async def _collect(settings, topic: str, seen: list, stop: asyncio.Event) -> None:
    c = consumer(settings, topic, group_id=None, auto_offset_reset="earliest")
    await c.start()
    try:
        while not stop.is_set():
            for msgs in (await c.getmany(timeout_ms=300)).values():
                seen += [json.loads(m.value) for m in msgs]
    finally:
        await c.stop()


async def _placed(port: int, tid: str) -> list[str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, rec = await asyncio.to_thread(call, port, "GET", f"/tasks/{tid}")
        if status == 200 and rec["status"] == "placed":
            return rec["nodes"]
        await asyncio.sleep(0.3)
    raise AssertionError(f"{tid} not placed: {rec}")


async def _incidents(port: int) -> list[dict]:
    status, body = await asyncio.to_thread(call, port, "GET", "/incidents")
    assert status == 200
    return body["open"]


async def test_probes_coming_up_one_by_one_fail_nothing_and_a_dark_node_still_moves_its_work(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)  # the defaults: 10 s windows, 30 s grace
    await ensure_topics(settings)
    ports = {n: free_port() for n in NODES}
    worker = start_worker(settings, tmp_path / "w.log")
    probes: dict[str, object] = {}
    stop, moves, incidents = asyncio.Event(), [], []
    p = producer(settings)
    await p.start()
    background = [asyncio.create_task(_report_forever(p, settings, stop)),
                  asyncio.create_task(_collect(settings, SCHED_RESCHEDULES, moves, stop)),
                  asyncio.create_task(_collect(settings, SCHED_INCIDENTS, incidents, stop))]
    try:
        await wait_nodes(settings.web_port, 3)
        homes = {}
        for tid in ("t1", "t2"):
            status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", {
                "id": tid, "type": "training-data-parallel", "resources": {"cards": 8}})
            assert status in (200, 202), body  # 202: decided after the answer (a cold compile cache)
            homes[tid] = await _placed(settings.web_port, tid)
            ev = {"task_id": tid, "event": "started", "at": time.time(), "nodes": homes[tid]}  # as a runner does
            await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(ev).encode(), key=tid.encode())
        for n in NODES:  # the agents start 12 s apart
            peers = [f"--peer={m}=127.0.0.1:{ports[m]}" for m in NODES if m != n]
            probes[n] = start_command(settings, tmp_path / f"probe-{n}.log", "probe", "--node", n,
                                      "--listen", f"127.0.0.1:{ports[n]}", *peers)
            await asyncio.sleep(12)
        await asyncio.sleep(25)  # every agent's first windows closed and judged
        assert await _incidents(settings.web_port) == []
        assert incidents == [] and moves == []  # none opened and recovered meanwhile either
        for tid, nodes in homes.items():
            status, rec = await asyncio.to_thread(call, settings.web_port, "GET", f"/tasks/{tid}")
            assert (rec["status"], rec["nodes"]) == ("running", nodes), rec
        # t1's node goes dark: its agent neither answers nor sends; its compute reports go on
        dark = homes["t1"][0]
        os.kill(probes[dark].pid, signal.SIGSTOP)
        went_dark = time.monotonic()
        while not moves and time.monotonic() - went_dark < 75:
            await asyncio.sleep(0.5)
        took = time.monotonic() - went_dark
        opened = await _incidents(settings.web_port)
    finally:
        stop.set()
        await asyncio.gather(*background, return_exceptions=True)
        await p.stop()
        for proc in probes.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            stop_process(proc)
        stop_process(worker)
    (move,) = moves
    assert (move["task_id"], move["trigger"], move["from_nodes"]) == ("t1", "node_failed", [dark])
    assert dark not in move["to_nodes"]
    assert took < 60, f"the work moved {took:.0f} s after the node went dark"
    assert [(i["node"], i["cause"]) for i in opened] == [(dark, "network")], (
        [(i["node"], i["status"], i["cause"], i.get("resolution")) for i in incidents], took)
