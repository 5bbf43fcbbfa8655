"""`cnsched demo`: a worker, simulated probes for a small multi-region cluster, and a live view of
what comes out of the pipeline (window statistics and dead letters)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from schemas.topics import NETSTATE_WINDOWS, PROBE_DEADLETTER
from streams.children import stop_process
from streams.config import Settings
from streams.kafka import consumer, ensure_topics, producer
from streams.procs import start_worker
from streams.producer import ProbeProducer
from streams.sim import ProbeSimulator, Topology


def _fmt(v) -> str:
    return "   -   " if v is None else f"{v:7.2f}"


async def run_demo(settings: Settings, args) -> int:
    await ensure_topics(settings)
    logfile = Path(settings.data_dir) / "demo-worker.log"
    print(f"broker   {settings.kafka_bootstrap}")
    print(f"worker   starting (log: {logfile})")
    worker = start_worker(settings, logfile)
    t = time.monotonic()
    if not await _wait_ready(settings, worker, timeout_s=120):
        stop_process(worker)
        print(f"worker did not become ready; see {logfile}")
        return 1
    print(f"worker   ready in {time.monotonic() - t:.1f} s")
    out = consumer(settings, NETSTATE_WINDOWS, PROBE_DEADLETTER, group_id=None,
                   auto_offset_reset="latest")
    await out.start()
    windows: list[dict] = []
    dead: list[dict] = []
    try:
        await out.getmany(timeout_ms=500)  # join: position at the end before we produce
        topo = Topology.small(args.nodes_per_region)
        sim = ProbeSimulator(topo, rate_hz=args.rate)
        print(f"probes   {len(topo.nodes)} nodes in 3 regions, rtt_ms at {args.rate:g} Hz per pair, "
              f"windows of {settings.window_seconds} s, for {args.seconds:g} s")
        async with ProbeProducer(settings) as probes:
            await _send_bad_examples(settings)
            sim_task = asyncio.create_task(sim.run(probes, args.seconds))
            while not sim_task.done():
                await _drain(out, windows, dead, topo)
                if worker.poll() is not None:
                    sim_task.cancel()
                    print(f"worker exited with status {worker.returncode}; see {logfile}")
                    return 1
            sent = sim_task.result()
        await _drain(out, windows, dead, topo, timeout_ms=2000)
    finally:
        await out.stop()
        status = stop_process(worker)
    print()
    print(f"summary  samples sent {sent:,}; window results received {len(windows):,}; "
          f"dead letters {len(dead)}; worker exit status {status}")
    if not windows:
        print(f"no window results arrived; see {logfile}")
        return 1
    lags = sorted(w["_lag_s"] for w in windows)
    print(f"latency  window results arrived {lags[len(lags) // 2]:.2f} s (median), {lags[-1]:.2f} s (max) "
          f"after their window ended; allowed lateness {settings.allowed_lateness_seconds:g} s")
    return 0


async def _wait_ready(settings: Settings, worker, timeout_s: float) -> bool:
    """Until the worker's HTTP API answers (it starts after kernels and the consumer group)."""
    import urllib.request

    url = f"http://127.0.0.1:{settings.web_port}/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.poll() is None:
        try:
            await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=1).read())
            return True
        except OSError:
            await asyncio.sleep(0.2)
    return False


async def _send_bad_examples(settings: Settings) -> None:
    """Two bad messages, so the demo shows that bad input is answered, not lost."""
    p = producer(settings)
    await p.start()
    try:
        topic = settings.topic("probe.samples")
        await p.send_and_wait(topic, b"\x00not a probe sample", key=b"bad-node")
        bad = [{"ts": time.time(), "src": "eu-n01", "dst": "", "metric": "bw_util", "value": 1.7}]
        await p.send_and_wait(topic, json.dumps(bad).encode(), key=b"eu-n01")
    finally:
        await p.stop()


async def _drain(out, windows, dead, topo, timeout_ms: int = 500) -> None:
    batches = await out.getmany(timeout_ms=timeout_ms)
    shown = 0
    for tp, msgs in batches.items():
        for m in msgs:
            doc = json.loads(m.value)
            if tp.topic.endswith(PROBE_DEADLETTER):
                dead.append(doc)
                print(f"deadltr  {doc['reason']:<12} {doc['detail'][:80]}")
                continue
            doc["_lag_s"] = time.time() - doc["window_end"]
            windows.append(doc)
            # one line per window for a few chosen series: intra-region and cross-region
            if doc["metric"] == "rtt_ms" and doc["src"] == topo.nodes[0] and shown < 4:
                shown += 1
                t = time.strftime("%H:%M:%S", time.localtime(doc["window_start"]))
                print(f"window   {t} {doc['src']:>9} -> {doc['dst']:<9} rtt_ms "
                      f"n={doc['count']:<5} lost={doc['lost']:<3} outl={doc['outliers']:<3} "
                      f"mean={_fmt(doc['mean'])} p50={_fmt(doc['p50'])} p95={_fmt(doc['p95'])} "
                      f"p99={_fmt(doc['p99'])}")
