"""`cnsched demo`: a worker, the DuckDB sink, simulated probes, compute reports, tasks and a simulated
task runner for a multi-region cluster, and a live view of what comes out: window statistics, dead
letters, decisions and migrations; then node, path and compute summaries and a forecast read from
the worker's HTTP API, and the benefit report and learned alphas read from DuckDB.

DuckDB starts with three simulated days of 1-minute history for the watched paths (so that forecasts
have history on a fresh machine); everything else in it comes through the topics during the run."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from schemas.topics import (
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    PROBE_DEADLETTER,
    PROBE_SAMPLES,
    SCHED_DECISIONS,
    SCHED_INCIDENTS,
    SCHED_RESCHEDULES,
)
from sinks.duckdb_store import DuckStore
from streams.config import Settings
from streams.dev import operator_view as ov
from streams.dev.operator_view import get
from streams.dev.sim import (
    ProbeSimulator,
    TaskRunner,
    Topology,
    compute_reports,
    history_windows,
    site_power_windows,
)
from streams.dev.workload import TRUE_ALPHA, Workload, submit_tasks
from streams.kafka import consumer, ensure_topics, producer
from streams.probe.producer import ProbeProducer
from streams.render.lines import deadletter_line, incident_line, reschedule_line, window_line
from streams.runtime.broker import port_in_use
from streams.runtime.processes import start_command, start_worker, stop_process

POWER_SITE = "eu-dc1"


@dataclass
class Demo:
    """One run: its settings and arguments, the simulated cluster, the child processes, and what
    came out of the topics."""

    settings: Settings
    args: object
    topo: Topology
    watch: list[tuple[str, str]]
    data_node: str  # holds the training data; it is busy
    logfile: Path
    worker: object = None
    sink: object = None
    silent: dict[str, float] = field(default_factory=dict)  # node -> when it stopped reporting
    incidents: list[dict] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)
    dead: list[dict] = field(default_factory=list)
    moves: list[dict] = field(default_factory=list)

    @property
    def suffix(self) -> str:
        return getattr(self.args, "id_suffix", "")


async def run_demo(settings: Settings, args) -> int:
    # a fresh database per run (the reports describe this run), shared by the sink and the worker
    db = Path(settings.data_dir) / "demo.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    # nodes report every 5 s; one silent for 15 s has failed (so a failure fits in the demo)
    settings = settings.model_copy(update={"duckdb_path": db,
                                           "node_timeout_seconds": min(settings.node_timeout_seconds, 15.0)})
    topo = Topology.build(args.nodes_per_region)
    demo = Demo(settings, args, topo, [(topo.nodes[0], topo.nodes[1]), (topo.nodes[0], topo.nodes[args.nodes_per_region])],
                topo.nodes[args.nodes_per_region], Path(settings.data_dir) / "demo-worker.log")
    if not await _start(demo):
        return 1
    work = Workload(settings, topo, TaskRunner(TRUE_ALPHA, time_scale=0.01), demo.suffix)
    out = consumer(settings, NETSTATE_WINDOWS, PROBE_DEADLETTER, SCHED_RESCHEDULES, SCHED_DECISIONS, SCHED_INCIDENTS,
                   group_id=None, auto_offset_reset="latest")
    await out.start()
    await work.start()
    try:
        await out.getmany(timeout_ms=500)  # join: position at the end before we produce
        sent = await _live(demo, out, work)
        if sent is None:
            return 1
        await _drain(demo, out, work, timeout_ms=2000)
        await work.finish_due()
        await asyncio.to_thread(ov.print_summaries, settings, topo, demo.watch)
        await asyncio.to_thread(ov.print_forecast, settings, demo.watch[1])
        await asyncio.to_thread(ov.print_power, settings, POWER_SITE)
        await asyncio.sleep(2.0)  # the sink's next batch: the last events
    finally:
        await out.stop()
        await work.stop()
        status = stop_process(demo.worker)
        sink_status = stop_process(demo.sink)
    await asyncio.to_thread(ov.print_reports, settings, TRUE_ALPHA)
    return _summary(demo, work, sent, status, sink_status)


async def _start(demo: Demo) -> bool:
    """Topics, the worker, DuckDB's simulated history, the sink; True once the worker answers."""
    settings = demo.settings
    if port_in_use(settings.web_host, settings.web_port):  # another worker's API would answer for ours
        print(f"port {settings.web_port} on {settings.web_host} is in use (another demo or worker?); "
              "stop it or set CNSCHED_WEB_PORT")
        return False
    await ensure_topics(settings)
    print(f"broker   {settings.kafka_bootstrap}")
    print(f"worker   starting (log: {demo.logfile})")
    demo.worker = start_worker(settings, demo.logfile)
    t = time.monotonic()
    rows = await asyncio.to_thread(_backfill, settings, demo.topo, demo.watch)
    print(f"duckdb   {settings.duckdb_path}: {rows:,} simulated past window results (1 per minute: 3 days of "
          f"rtt for {len(demo.watch)} paths, 1 day of {POWER_SITE} facility power), so forecasts have history")
    sink_log = Path(settings.data_dir) / "demo-sink.log"
    demo.sink = start_command(settings, sink_log, "sink")
    print(f"sink     started (log: {sink_log})")
    if not await _wait_ready(settings, demo.worker, timeout_s=120):
        stop_process(demo.worker)
        stop_process(demo.sink)
        print(f"worker did not become ready; see {demo.logfile}")
        return False
    print(f"worker   ready in {time.monotonic() - t:.1f} s")
    src, dst = demo.watch[1]
    print(f"dashboard http://{settings.web_host}:{settings.web_port}/ui#src={src}&dst={dst}&site={POWER_SITE}"
          "  (open it while the demo runs)")
    return True


async def _live(demo: Demo, out, work: Workload) -> int | None:
    """Probes, compute reports, bad examples, the showcase tasks and the workload for ``seconds``,
    printing what flows; the samples sent (None when the worker died)."""
    settings, args, topo, watch = demo.settings, demo.args, demo.topo, demo.watch
    sim = ProbeSimulator(topo, rate_hz=args.rate, day_s=args.day_seconds)
    # a reroute on the watched inter-region path, 40 % into the demo, for the rest of it
    sim.inject("reroute", *watch[1], time.time() + 0.4 * args.seconds, args.seconds, 2.0)
    t_start = time.monotonic()
    print(f"probes   {len(topo.nodes)} nodes in {len(set(topo.region.values()))} regions, "
          f"{len(set(topo.dc.values()))} data centres; rtt_ms at {args.rate:g} Hz per pair; "
          f"windows of {settings.window_seconds} s; a simulated day lasts {args.day_seconds:g} s")
    print(f"event    {watch[1][0]} <-> {watch[1][1]} will be rerouted (2x latency) after {0.4 * args.seconds:.0f} s")
    async with ProbeProducer(settings) as probes:
        await _send_bad_examples(settings)
        jobs = [asyncio.create_task(sim.run(probes, args.seconds)),
                asyncio.create_task(_report_compute(demo, args.seconds, frozenset({demo.data_node}))),
                asyncio.create_task(work.submit(0.2 * args.seconds, 0.75 * args.seconds))]
        submit_at = t_start + max(0.25 * args.seconds, settings.window_seconds + settings.allowed_lateness_seconds + 1)
        submitted = False
        while not jobs[0].done():
            await _drain(demo, out, work)
            if not submitted and time.monotonic() >= submit_at:
                submitted = True
                await _showcase(demo, sim, t_start, work)
            if demo.worker.poll() is not None:
                for job in jobs:
                    job.cancel()
                print(f"worker exited with status {demo.worker.returncode}; see {demo.logfile}")
                return None
        await jobs[1]
        await jobs[2]
        return jobs[0].result()


async def _showcase(demo: Demo, sim: ProbeSimulator, t_start: float, work: Workload) -> None:
    """The four showcase tasks; the training job's path to its data degrades at 45 % of the run, and
    the inference service's node falls silent at 55 % (a node failure) and reports again at 85 %."""
    args = demo.args
    placed = await asyncio.to_thread(submit_tasks, demo.settings, demo.topo, demo.data_node, demo.suffix,
                                     work.expected)
    elapsed = time.monotonic() - t_start
    if "training-data-parallel" in placed:
        chosen = placed["training-data-parallel"][0]
        start = time.time() + max(0.0, 0.45 * args.seconds - elapsed)
        sim.inject("reroute", chosen, demo.data_node, start, args.seconds, 50.0)
        sim.inject("loss", chosen, demo.data_node, start, args.seconds, 0.05)
        print(f"event    {chosen} <-> {demo.data_node} (the training data) degrades at "
              f"{0.45 * args.seconds:.0f} s: latency x50, 5 % loss")
    if "inference" in placed:
        node = placed["inference"][0]
        delay = max(0.0, 0.55 * args.seconds - elapsed)
        asyncio.get_running_loop().call_later(delay, demo.silent.setdefault, node, time.time() + delay)
        back = max(0.0, 0.85 * args.seconds - elapsed)
        asyncio.get_running_loop().call_later(back, demo.silent.pop, node, None)
        print(f"event    {node} (the inference service's node) stops reporting at {0.55 * args.seconds:.0f} s; "
              f"a node silent for {demo.settings.node_timeout_seconds:g} s has failed; it reports again at "
              f"{0.85 * args.seconds:.0f} s (its incident stays open until then)")


def _summary(demo: Demo, work: Workload, sent: int, status: int, sink_status: int) -> int:
    print()
    print(f"summary  samples sent {sent:,}; window results received {len(demo.windows):,}; "
          f"dead letters {len(demo.dead)}; tasks submitted {work.submitted}, started {work.started}, finished "
          f"{work.finished}; reschedules {len(demo.moves)}; incidents {len({(i['node'], i['detected_at']) for i in demo.incidents})}; worker exit status "
          f"{status}, sink {sink_status}")
    if not demo.windows:
        print(f"no window results arrived; see {demo.logfile}")
        return 1
    lags = sorted(w["_lag_s"] for w in demo.windows)
    print(f"latency  window results arrived {lags[len(lags) // 2]:.2f} s (median), {lags[-1]:.2f} s (max) "
          f"after their window ended; allowed lateness {demo.settings.allowed_lateness_seconds:g} s")
    return 0


async def _wait_ready(settings: Settings, worker, timeout_s: float) -> bool:
    """Until the worker's HTTP API answers (it starts after kernels and the consumer group)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.poll() is None:
        try:
            await asyncio.to_thread(get, settings, "/health")
            return True
        except OSError:
            await asyncio.sleep(0.2)
    return False


async def _report_compute(demo: Demo, seconds: float, busy: frozenset[str], every_s: float = 5.0) -> None:
    """Every node reports its inventory at start and then every ``every_s`` (its heartbeat), but
    the ones the demo silenced."""
    settings = demo.settings
    p = producer(settings)
    await p.start()
    try:
        deadline = time.time() + seconds
        while True:
            for r in compute_reports(demo.topo, time.time(), busy=busy):
                if r["node"] not in demo.silent:
                    await p.send(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
            await p.flush()
            if time.time() + every_s > deadline:
                return
            await asyncio.sleep(every_s)
    finally:
        await p.stop()


async def _send_bad_examples(settings: Settings) -> None:
    """Two bad messages, so the demo shows that bad input is answered, not lost."""
    p = producer(settings)
    await p.start()
    try:
        topic = settings.topic(PROBE_SAMPLES)
        await p.send_and_wait(topic, b"\x00not a probe sample", key=b"bad-node")
        bad = [{"ts": time.time(), "src": "eu-n01", "dst": "", "metric": "bw_util", "value": 1.7}]
        await p.send_and_wait(topic, json.dumps(bad).encode(), key=b"eu-n01")
    finally:
        await p.stop()


async def _drain(demo: Demo, out, work: Workload, timeout_ms: int = 500) -> None:
    batches = await out.getmany(timeout_ms=timeout_ms)
    for tp, msgs in batches.items():
        for m in msgs:
            doc = json.loads(m.value)
            if tp.topic.endswith(SCHED_DECISIONS):
                await work.decided(doc)
            elif tp.topic.endswith(SCHED_RESCHEDULES):
                demo.moves.append(doc)
                print(reschedule_line(doc))
                await work.moved(doc)
            elif tp.topic.endswith(SCHED_INCIDENTS):
                demo.incidents.append(doc)
                print(incident_line(doc, demo.silent.get(doc["node"])))  # when it fell silent
            elif tp.topic.endswith(PROBE_DEADLETTER):
                demo.dead.append(doc)
                print(deadletter_line(doc))
            else:
                doc["_lag_s"] = time.time() - doc["window_end"]
                demo.windows.append(doc)
                if doc["metric"] == "rtt_ms" and (doc["src"], doc["dst"]) in demo.watch:
                    print(window_line(doc))


def _backfill(settings: Settings, topo: Topology, pairs) -> int:
    now = time.time()
    with DuckStore.open(settings.duckdb_path) as store:
        return store.write_windows(history_windows(topo, pairs, now, days=3)
                                   + site_power_windows(POWER_SITE, now, days=1))
