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
from pathlib import Path

from schemas.topics import (
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    PROBE_DEADLETTER,
    PROBE_SAMPLES,
    SCHED_DECISIONS,
    SCHED_EVENTS,
    SCHED_RESCHEDULES,
    SCHED_TASKS,
)
from sinks.duckdb_store import DuckStore
from streams.client import base_url, call
from streams.config import Settings
from streams.dev.sim import (
    ProbeSimulator,
    TaskRunner,
    Topology,
    compute_reports,
    history_windows,
    site_power_windows,
)
from streams.kafka import consumer, ensure_topics, producer
from streams.probe.producer import ProbeProducer
from streams.runtime.processes import start_command, start_worker, stop_process

# the alphas the simulated runner uses (what the learner should find); type defaults differ
TRUE_ALPHA = {"training-data-parallel": 0.35, "fine-tune": 0.6, "batch-analytics": 0.8, "inference": 0.7,
              "preprocessing": 0.5, "data-intensive": 0.25}
WORKLOAD_TYPES = ("fine-tune", "batch-analytics", "data-intensive", "preprocessing", "inference")


def _fmt(v) -> str:
    return "   -   " if v is None else f"{v:7.2f}"


def _r(v, digits: int):
    return None if v is None else round(v, digits)


def _get(settings: Settings, path: str) -> dict:
    return _ok(call(base_url(settings.web_host, settings.web_port), "GET", path, timeout=5))


def _ok(answer: tuple[int, dict]) -> dict:
    status, body = answer
    if status >= 400:
        raise OSError(f"HTTP {status}: {body}")
    return body


async def run_demo(settings: Settings, args) -> int:
    # a fresh database per run (the reports describe this run), shared by the sink and the worker
    db = Path(settings.data_dir) / "demo.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    settings = settings.model_copy(update={"duckdb_path": db})
    await ensure_topics(settings)
    logfile = Path(settings.data_dir) / "demo-worker.log"
    print(f"broker   {settings.kafka_bootstrap}")
    print(f"worker   starting (log: {logfile})")
    worker = start_worker(settings, logfile)
    t = time.monotonic()
    topo = Topology.build(args.nodes_per_region)
    watch = [(topo.nodes[0], topo.nodes[1]), (topo.nodes[0], topo.nodes[args.nodes_per_region])]
    rows = await asyncio.to_thread(_backfill, settings, topo, watch)
    print(f"duckdb   {settings.duckdb_path}: {rows:,} simulated past window results (1 per minute: 3 days of "
          f"rtt for {len(watch)} paths, 1 day of {POWER_SITE} facility power), so forecasts have history")
    sink_log = Path(settings.data_dir) / "demo-sink.log"
    sink = start_command(settings, sink_log, "sink")
    print(f"sink     started (log: {sink_log})")
    if not await _wait_ready(settings, worker, timeout_s=120):
        stop_process(worker)
        stop_process(sink)
        print(f"worker did not become ready; see {logfile}")
        return 1
    print(f"worker   ready in {time.monotonic() - t:.1f} s")
    sim = ProbeSimulator(topo, rate_hz=args.rate, day_s=args.day_seconds)
    # a reroute on the watched inter-region path, 40 % into the demo, for the rest of it
    sim.inject("reroute", *watch[1], time.time() + 0.4 * args.seconds, args.seconds, 2.0)
    data_node = topo.nodes[args.nodes_per_region]  # the first us node holds the training data; it is busy
    out = consumer(settings, NETSTATE_WINDOWS, PROBE_DEADLETTER, SCHED_RESCHEDULES, SCHED_DECISIONS, group_id=None,
                   auto_offset_reset="latest")
    await out.start()
    windows: list[dict] = []
    dead: list[dict] = []
    moves: list[dict] = []
    sent = 0
    t_start = time.monotonic()
    runner = TaskRunner(TRUE_ALPHA, time_scale=0.01)
    work = Workload(settings, topo, runner, getattr(args, "id_suffix", ""))
    await work.start()
    try:
        await out.getmany(timeout_ms=500)  # join: position at the end before we produce
        print(f"probes   {len(topo.nodes)} nodes in {len(set(topo.region.values()))} regions, "
              f"{len(set(topo.dc.values()))} data centres; rtt_ms at {args.rate:g} Hz per pair; "
              f"windows of {settings.window_seconds} s; a simulated day lasts {args.day_seconds:g} s")
        print(f"event    {watch[1][0]} <-> {watch[1][1]} will be rerouted (2x latency) after "
              f"{0.4 * args.seconds:.0f} s")
        async with ProbeProducer(settings) as probes:
            await _send_bad_examples(settings)
            reports = asyncio.create_task(_report_compute(settings, topo, args.seconds, frozenset({data_node})))
            sim_task = asyncio.create_task(sim.run(probes, args.seconds))
            submit_at = time.monotonic() + max(0.25 * args.seconds, settings.window_seconds + settings.allowed_lateness_seconds + 1)
            submitted = False
            workload = asyncio.create_task(work.submit(0.2 * args.seconds, 0.75 * args.seconds))
            while not sim_task.done():
                await _drain(out, windows, dead, watch, moves, work)
                if not submitted and time.monotonic() >= submit_at:
                    submitted = True
                    chosen = await asyncio.to_thread(_submit_tasks, settings, topo, data_node,
                                                     getattr(args, "id_suffix", ""))
                    if chosen:
                        start = time.time() + max(0.0, 0.45 * args.seconds - (time.monotonic() - t_start))
                        sim.inject("reroute", chosen, data_node, start, args.seconds, 50.0)
                        sim.inject("loss", chosen, data_node, start, args.seconds, 0.05)
                        print(f"event    {chosen} <-> {data_node} (the training data) degrades at "
                              f"{0.45 * args.seconds:.0f} s: latency x50, 5 % loss")
                if worker.poll() is not None:
                    sim_task.cancel()
                    reports.cancel()
                    workload.cancel()
                    print(f"worker exited with status {worker.returncode}; see {logfile}")
                    return 1
            sent = sim_task.result()
            await reports
            await workload
        await _drain(out, windows, dead, watch, moves, work, timeout_ms=2000)
        await work.finish_due()
        await asyncio.to_thread(_print_summaries, settings, topo, watch)
        await asyncio.to_thread(_print_forecast, settings, watch[1])
        await asyncio.to_thread(_print_power, settings)
        await asyncio.sleep(2.0)  # the sink's next batch: the last events
    finally:
        await out.stop()
        await work.stop()
        status = stop_process(worker)
        sink_status = stop_process(sink)
    await asyncio.to_thread(_print_reports, settings)
    print()
    print(f"summary  samples sent {sent:,}; window results received {len(windows):,}; "
          f"dead letters {len(dead)}; tasks submitted {work.submitted}, started {work.started}, finished "
          f"{work.finished}; reschedules {len(moves)}; worker exit status {status}, sink {sink_status}")
    if not windows:
        print(f"no window results arrived; see {logfile}")
        return 1
    lags = sorted(w["_lag_s"] for w in windows)
    print(f"latency  window results arrived {lags[len(lags) // 2]:.2f} s (median), {lags[-1]:.2f} s (max) "
          f"after their window ended; allowed lateness {settings.allowed_lateness_seconds:g} s")
    return 0


async def _wait_ready(settings: Settings, worker, timeout_s: float) -> bool:
    """Until the worker's HTTP API answers (it starts after kernels and the consumer group)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.poll() is None:
        try:
            await asyncio.to_thread(_get, settings, "/health")
            return True
        except OSError:
            await asyncio.sleep(0.2)
    return False


async def _report_compute(settings: Settings, topo: Topology, seconds: float, busy: frozenset[str]) -> None:
    """Every node reports its inventory at start and then every 10 s (its heartbeat)."""
    p = producer(settings)
    await p.start()
    try:
        deadline = time.time() + seconds
        while True:
            for r in compute_reports(topo, time.time(), busy=busy):
                await p.send(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
            await p.flush()
            if time.time() + 10 > deadline:
                return
            await asyncio.sleep(10)
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


async def _drain(out, windows, dead, watch, moves, work, timeout_ms: int = 500) -> None:
    batches = await out.getmany(timeout_ms=timeout_ms)
    for tp, msgs in batches.items():
        for m in msgs:
            doc = json.loads(m.value)
            if tp.topic.endswith(SCHED_DECISIONS):
                await work.decided(doc)
                continue
            if tp.topic.endswith(SCHED_RESCHEDULES):
                moves.append(doc)
                print(f"resched  {doc['task_id']} {','.join(doc['from_nodes'])} -> {','.join(doc['to_nodes'])} "
                      f"({doc['trigger']}): expected gain {doc['expected_gain_s']:.0f} s > migration cost "
                      f"{doc['migration_cost_s']:.0f} s; composite {doc['before']['composite']:.1f} -> "
                      f"{doc['after']['composite']:.1f}")
                continue
            if tp.topic.endswith(PROBE_DEADLETTER):
                dead.append(doc)
                print(f"deadltr  {doc['reason']:<12} {doc['detail'][:80]}")
                continue
            doc["_lag_s"] = time.time() - doc["window_end"]
            windows.append(doc)
            if doc["metric"] == "rtt_ms" and (doc["src"], doc["dst"]) in watch:
                t = time.strftime("%H:%M:%S", time.localtime(doc["window_start"]))
                print(f"window   {t} {doc['src']:>9} -> {doc['dst']:<9} rtt_ms "
                      f"n={doc['count']:<5} lost={doc['lost']:<3} outl={doc['outliers']:<3} "
                      f"mean={_fmt(doc['mean'])} p50={_fmt(doc['p50'])} p95={_fmt(doc['p95'])} "
                      f"p99={_fmt(doc['p99'])}")


DEMO_TASKS = [
    {"id": "train-dp-1", "type": "training-data-parallel", "resources": {"cards": 2, "host_mem_gb": 64},
     "checkpoint_gb": 20, "expected_duration_s": 4 * 3600, "priority": 70},
    {"id": "infer-1", "type": "inference", "resources": {"cards": 1}, "expected_duration_s": 86400},
    {"id": "prep-1", "type": "preprocessing", "resources": {"host_mem_gb": 32}},
    {"id": "huge-1", "type": "training-model-parallel", "resources": {"cards": 64}},
]


def _post(settings: Settings, path: str, body: dict) -> dict:
    return _ok(call(base_url(settings.web_host, settings.web_port), "POST", path, body))


def _submit_tasks(settings: Settings, topo: Topology, data_node: str, suffix: str = "") -> str | None:
    """POST the demo's tasks; print each decision; return where the data-parallel job went."""
    chosen = None
    for spec in DEMO_TASKS:
        task = {**spec, "id": spec["id"] + suffix}
        if task["type"] == "training-data-parallel":
            task["data_source"] = {"node": data_node, "size_gb": 50}
        if task["type"] == "inference":
            task["model_repo"] = {"node": topo.nodes[0], "size_gb": 14}
        try:
            res = _post(settings, "/tasks", task)
        except OSError as exc:
            print(f"decision {task['id']}: POST /tasks failed: {exc}")
            continue
        d = res.get("decision") or {}
        if res.get("status") == "placed":
            cands = " | ".join(f"{c['node']} {c['composite']:.1f}" for c in d["candidates"][:3])
            print(f"decision {task['id']} -> {','.join(res['nodes'])} (alpha {d['alpha']:.2f}, {d['network_profile']} "
                  f"profile); best: {cands}; compute-only would pick {','.join(d['compute_only_nodes'])}")
            if task["type"] == "training-data-parallel":
                chosen = res["nodes"][0]
        else:
            counts = ", ".join(f"{k} x{v}" for k, v in (d.get("rejected_counts") or {}).items())
            print(f"decision {task['id']} {d.get('status', res.get('status'))}: {counts}")
    return chosen


def _print_summaries(settings: Settings, topo: Topology, watch) -> None:
    """What an operator asks: how is node X, how is the path X -> Y, what can node X compute."""
    node = watch[0][0]
    try:
        n = _get(settings, f"/network/nodes/{node}")
        print(f"\nGET /network/nodes/{node}")
        print(f"  nic util {_r(n['bw_util'], 2)}, retrans {_r(n['retrans_rate'], 4)}, mean quality to "
              f"{n['peers']} peers {_r(n['mean_quality_to_peers'], 1)}, worst peer {n['worst_peer']}, "
              f"window age {_r(n['age_s'], 1)} s")
        for src, dst in watch:
            p = _get(settings, f"/network/paths/{src}/{dst}")
            x = p["inputs"]
            print(f"GET /network/paths/{src}/{dst}")
            qp = p["quality_by_profile"]
            print(f"  quality {_r(p['quality'], 1)} (latency profile {_r(qp['latency'], 1)}, bandwidth "
                  f"{_r(qp['bandwidth'], 1)}); p95 {_r(x['p95_rtt_ms'], 3)} ms, jitter {_r(x['jitter_ms'], 3)} ms, "
                  f"loss {_r(x['loss'], 4)}, util {_r(x['bw_util'], 2)}; window age {_r(p['age_s'], 1)} s")
        c = _get(settings, "/compute/nodes?limit=1000")
        print("GET /compute/nodes")
        for item in c["items"][: min(len(c["items"]), 6)]:
            print(f"  {item['node']:<10} {item['class']:<5} available={item['available']!s:<5} "
                  f"training {item['compute_score']['training']:6.1f}  inference {item['compute_score']['inference']:6.1f}")
    except OSError as exc:
        print(f"summaries unavailable: {exc}")


def _backfill(settings: Settings, topo: Topology, pairs) -> int:
    now = time.time()
    with DuckStore.open(settings.duckdb_path) as store:
        return store.write_windows(history_windows(topo, pairs, now, days=3)
                                   + site_power_windows(POWER_SITE, now, days=1))


POWER_SITE = "eu-dc1"


class Workload:
    """Small tasks sent to sched.tasks through the demo, and a simulated runner that reports their
    lifecycle (started, finished with duration and throughput) on sched.events."""

    def __init__(self, settings: Settings, topo: Topology, runner: TaskRunner, suffix: str = "") -> None:
        self.settings, self.topo, self.runner, self.suffix = settings, topo, runner, suffix
        self.p = producer(settings)
        self.expected: dict[str, float] = {}
        self.submitted = self.started = self.finished = 0
        self.shown_energy = False

    async def start(self) -> None:
        await self.p.start()

    async def stop(self) -> None:
        await self.p.stop()

    async def submit(self, begin_s: float, end_s: float, every_s: float = 0.5) -> None:
        """One task every ``every_s`` between ``begin_s`` and ``end_s`` into the run; each finishes
        events that are due on the way."""
        t0 = time.monotonic()
        await asyncio.sleep(begin_s)
        k = 0
        while time.monotonic() - t0 < end_s:
            kind = WORKLOAD_TYPES[k % len(WORKLOAD_TYPES)]
            data = self.topo.nodes[(k * 7) % len(self.topo.nodes)]
            task = {"id": f"w{k:04d}{self.suffix}", "type": kind, "resources": {"cards": 1, "host_mem_gb": 8},
                    "data_source": {"node": data, "size_gb": 5}, "expected_duration_s": 300 + 100 * (k % 10),
                    "submitted_at": time.time()}
            if kind == "batch-analytics":  # batch work asks for cheaper, greener power
                task["cost_sensitivity"] = 0.3
            self.expected[task["id"]] = task["expected_duration_s"]
            await self.p.send(self.settings.topic(SCHED_TASKS), json.dumps(task).encode(), key=task["id"].encode())
            self.submitted += 1
            k += 1
            await self.finish_due()
            await asyncio.sleep(every_s)

    async def decided(self, d: dict) -> None:
        if d.get("cost_sensitivity") and d.get("status") == "placed" and not self.shown_energy:
            self.shown_energy = True
            c = next(c for c in d["candidates"] if c["node"] in d["nodes"])
            print(f"decision {d['task_id']} ({d['task_type']}, cost sensitivity {d['cost_sensitivity']:g}) -> "
                  f"{','.join(d['nodes'])}: energy score {c['energy_score']:.0f}, composite {c['composite']:.1f}; "
                  f"compute-only would pick {','.join(d['compute_only_nodes'])}")
        started = self.runner.placed(d, self.expected.get(d["task_id"], 3600.0), time.time())
        if started is not None:
            self.started += 1
            await self._event(started)

    async def finish_due(self) -> None:
        for e in self.runner.due(time.time()):
            self.finished += 1
            await self._event(e)

    async def _event(self, e: dict) -> None:
        await self.p.send(self.settings.topic(SCHED_EVENTS), json.dumps(e).encode(), key=e["task_id"].encode())


def _print_forecast(settings: Settings, path) -> None:
    src, dst = path
    try:
        f = _get(settings, f"/forecast/paths/{src}/{dst}?metric=rtt_ms&stat=p95&horizon=60m")
    except OSError as exc:
        print(f"forecast unavailable: {exc}")
        return
    pts = f["points"]
    vals = [p["value"] for p in pts]
    print(f"GET /forecast/paths/{src}/{dst}?metric=rtt_ms&stat=p95&horizon=60m  (from {f['history_steps']:,} "
          f"steps of {f['step_s']:g} s history)")
    print("  " + "  ".join(f"{time.strftime('%H:%M', time.localtime(p['t']))} {p['value']:.1f}" for p in pts[::10])
          + f"   (min {min(vals):.1f}, max {max(vals):.1f} ms)")


def _print_power(settings: Settings) -> None:
    path = f"/power/{POWER_SITE}/smoothing?window=15min&interval=1min&period=1d&ramp_limit=2"
    try:
        b = _get(settings, path)
    except OSError as exc:
        print(f"power smoothing unavailable: {exc}")
        return
    print(f"GET {path}")
    print(f"  {b['samples']:,} minutes: battery {b['power_capacity_mw']:.1f} MW / {b['recommended_energy_kwh']:,.0f} kWh "
          f"(largest discharge {b['discharge_energy_kwh']:,.0f} kWh, charge {b['charge_energy_kwh']:,.0f} kWh, "
          f"SOC swing {b['soc_swing_kwh']:,.0f} kWh); max ramp {b['original_max_ramp_mw_per_min']:.1f} -> "
          f"{b['smoothed_max_ramp_mw_per_min']:.1f} MW/min ({b['smoothing_rate_pct']:.0f} % smoother)"
          + ("" if b["ramp_limit_met"] else f"; the 15-min block target itself ramps "
             f"{b['target_max_ramp_mw_per_min']:.1f} MW/min"))


def _print_reports(settings: Settings) -> None:
    from sinks.queries import run_sections
    from streams.analytics.alphas import learned_alphas
    from streams.render import tables

    try:
        with DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=10) as store:
            sections = run_sections(store.con)
            alphas = learned_alphas(store.con, min_tasks=settings.alpha_min_tasks)
    except Exception as exc:  # the demo still ends with its summary
        print(f"reports unavailable: {exc}")
        return
    print("\ncnsched report benefit  (from DuckDB)")
    print(tables.sections(sections), end="")
    print("cnsched report alpha  (learned from finished tasks; the runner's true alphas: "
          + ", ".join(f"{k} {v}" for k, v in TRUE_ALPHA.items() if k in {r['task_type'] for r in alphas}) + ")")
    print(tables.alpha_table(alphas))
