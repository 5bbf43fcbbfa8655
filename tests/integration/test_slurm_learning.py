"""Issue 55, the learning loop closed under the real three-node Slurm with a live worker's own
decisions: the worker places each task from what node agents and probes report (a world drawn anew
before each), the bridge runs it as a Slurm job, the job reports the throughput a planted truth gives
at the place the worker chose, the sink stores it, and the worker's next decisions use the learned
alpha."""

from __future__ import annotations

import asyncio
import json
import os
import time

import numpy as np
import pytest

from streams.kafka import ensure_topics
from streams.runtime.processes import start_worker, stop_process
from streams.runtime.slurm_cluster import missing
from tests.helpers.http import call, get_text
from tests.helpers.scheduling import gpu_node, win
from tests.integration.test_slurm import nodes, until_status

pytestmark = [pytest.mark.integration, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

TRUTH, TASKS = 0.8, 14  # the type's (data-intensive) default alpha is 0.3


async def _feed(settings, slurm, world: dict, stop: asyncio.Event) -> None:
    """As node agents and a probe agent would: each node's report (its card peak; a region of its own)
    and the store's path to it (its RTT), every second, from ``world``."""
    from schemas.topics import COMPUTE_NODES, NETSTATE_WINDOWS
    from streams.kafka import producer

    p = producer(settings)
    await p.start()
    try:
        while not stop.is_set():
            now = time.time()
            for n in slurm.nodes:
                fp16, rtt = world[n]
                r = {k: v for k, v in gpu_node(n, now, region=f"r-{n}").items() if k != "received_at"}
                r["peak_tflops"] = {"fp16": fp16, "int8": 2 * fp16, "fp32": fp16 / 10}  # data-intensive: fp32
                await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=n.encode())
                w = {"src": "store", "dst": n, "metric": "rtt_ms", **win(now, rtt)}
                await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(w).encode(), key=n.encode())
            await asyncio.sleep(1)
    finally:
        await p.stop()


async def test_a_live_workers_learned_alpha_moves_to_what_its_slurm_jobs_measured(make_settings, tmp_path, slurm):
    from streams.bridge.slurm import run_bridge
    from streams.runtime.sink_runner import WindowSink

    settings = make_settings(rescore_interval_seconds=0.3, history_refresh_seconds=2, alpha_min_tasks=TASKS - 2)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    stop, ready = asyncio.Event(), asyncio.Event()
    bridge = asyncio.create_task(run_bridge(settings, "card", {}, 1.0, stop, tmp_path / "bridge", slurm.env, ready,
                                            with_inventory=False))
    sink = WindowSink(settings)
    stored = asyncio.create_task(sink.run())
    rng = np.random.default_rng(11)
    world = {n: (1000.0, 1.0) for n in slurm.nodes}
    feeding = asyncio.create_task(_feed(settings, slurm, world, stop))
    measured = tmp_path / "measured"
    measured.mkdir()
    placed = []
    try:
        await asyncio.wait_for(ready.wait(), 60)
        await nodes(port, 3)  # the worker holds the three nodes' reports (a slow start: a loaded machine)
        for k in range(TASKS):
            world.update({n: (float(rng.uniform(300, 1000)), float(rng.uniform(0.5, 40))) for n in slurm.nodes})
            await asyncio.sleep(2.5)  # the worker sees this world
            drop = measured / f"learn{k}.json"
            # two of the three nodes allowed (data residency): the fastest card is not always among them
            allowed = sorted(f"r-{n}" for n in rng.choice(slurm.nodes, 2, replace=False))
            task = {"id": f"learn{k}", "type": "data-intensive", "resources": {"cards": 8},
                    "data_source": {"node": "store", "size_gb": 1}, "constraints": {"regions": allowed},
                    # the job's measurement: the throughput the planted truth gives where it was placed
                    "command": f"while [ ! -s {drop} ]; do sleep 0.2; done; cp {drop} $CNSCHED_PROGRESS_FILE"}
            status, d = await asyncio.to_thread(call, port, "POST", "/tasks", task)
            assert status == 200 and d["status"] == "placed", d
            (chosen,) = [c for c in d["decision"]["candidates"] if c["node"] == d["nodes"][0]][:1]
            c, n = chosen["compute_score"], chosen["network_score"]
            placed.append((d["nodes"][0], d["decision"]["alpha"], c, n))
            tmp = drop.with_suffix(".tmp")
            tmp.write_text(json.dumps({"throughput": round(1000 * (TRUTH * c + (1 - TRUTH) * n) / 100, 3)}))
            os.replace(tmp, drop)
            rec = await until_status(port, f"learn{k}", ("finished", "failed"), 60)
            assert rec["status"] == "finished", rec
        deadline, learned = time.monotonic() + 90, None
        while time.monotonic() < deadline and learned is None:  # the worker's history refresh reads it
            await asyncio.sleep(1)
            learned = _type_alpha(await asyncio.to_thread(get_text, port, "/metrics"), "learned")
    finally:
        stop.set()
        await bridge
        await feeding
        sink.stop.set()
        await stored
        stop_process(worker)
    print(f"\nlive learning: {len(placed)} tasks placed on {sorted({p[0] for p in placed})} with compute "
          f"{min(p[2] for p in placed):.1f}-{max(p[2] for p in placed):.1f} and network "
          f"{min(p[3] for p in placed):.1f}-{max(p[3] for p in placed):.1f}; the type's alpha learned: {learned}")
    assert len({p[0] for p in placed}) > 1 and np.ptp([p[2] for p in placed]) > 0 and np.ptp([p[3] for p in placed]) > 0
    assert learned is not None and abs(learned - TRUTH) <= 0.1, learned


def _type_alpha(metrics: str, source: str) -> float | None:
    """cnsched_type_alpha of data-intensive from ``source`` (learned or default), if exported."""
    for line in metrics.splitlines():
        if line.startswith("cnsched_type_alpha{") and 'type="data-intensive"' in line \
                and f'source="{source}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None
