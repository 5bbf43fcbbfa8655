"""The `cnsched` command: the parser, dispatch and the infrastructure commands (broker, topics, worker,
sink, probe, stats, bench, demo); the DuckDB/power commands live in `cli_data`, the API client
commands in `cli_api`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
import time

from schemas.topics import PROBE_SAMPLES
from sinks.duckdb_store import StoreError
from streams.cli import api as cli_api
from streams.cli import data as cli_data
from streams.cli.common import Parser, UsageError, print_result
from streams.config import ConfigError, Settings, load_settings
from streams.logs import setup_logging
from streams.runtime.broker import BrokerError, EmbeddedBroker

log = logging.getLogger("cnsched")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="cnsched", description="Compute-network joint scheduler for AI workloads.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    b = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (Tansu, memory storage)")
    b.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--json", action="store_true", help="print the address as JSON")

    w = sub.add_parser("worker", help="run a Faust worker (needs KAFKA_BOOTSTRAP)")
    w.add_argument("--baseline", action="store_true",
                   help="run the benchmark baseline (one JSON sample per message) instead")

    t = sub.add_parser("topics", help="create the topics with the configured partition count")
    t.add_argument("--json", action="store_true")

    sub.add_parser("sink", help="run the DuckDB sink, the single writer of CNSCHED_DUCKDB_PATH")

    pr = sub.add_parser("probe", help="run a probe agent: UDP echo mesh, NIC and TCP counters (Linux)")
    pr.add_argument("--node", required=True, help="this node's id")
    pr.add_argument("--listen", default="0.0.0.0:7077", help="HOST:PORT to answer and send probes on")
    pr.add_argument("--peer", action="append", default=[], metavar="[ID=]HOST:PORT", help="repeatable")
    pr.add_argument("--peers-file", help="one [ID=]HOST:PORT (or 'ID HOST:PORT') per line; the group")
    pr.add_argument("--rate", type=float, default=10.0, help="probes per second per peer (max 1000)")
    pr.add_argument("--timeout", type=float, default=1.0, help="seconds before a probe counts as lost")
    pr.add_argument("--iface", action="append", default=[], help="interfaces for bw_util (default: all but lo)")
    pr.add_argument("--link-gbps", type=float, default=None, help="link speed when /sys has none")
    pr.add_argument("--seconds", type=float, default=0.0, help="stop after this long (default: run until stopped)")
    pr.add_argument("--json", action="store_true", help="print the final counters as JSON")

    st = sub.add_parser("stats", help="window statistics of captured samples (JSON, JSON lines, Arrow)")
    st.add_argument("file", nargs="?", default="-", help="input file, or - for stdin (default)")
    st.add_argument("--window-seconds", type=int, default=None, help="default CNSCHED_WINDOW_SECONDS")
    st.add_argument("--step-seconds", type=int, default=None, help="default CNSCHED_WINDOW_STEP_SECONDS")
    st.add_argument("--lateness-seconds", type=float, default=None,
                    help="default CNSCHED_ALLOWED_LATENESS_SECONDS")
    st.add_argument("--json", action="store_true", help="a JSON array of window results")

    cli_data.add_parsers(sub)
    cli_api.add_parsers(sub)

    bench = sub.add_parser("bench", help="benchmarks: ours beside the baseline, with ratios")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCH", parser_class=Parser, required=True)
    bi = bsub.add_parser("ingest", help="end-to-end ingest vs a one-sample-per-message agent vs the kernel")
    bi.add_argument("--samples", type=int, default=5_000_000)
    bi.add_argument("--batch", type=int, default=1000, help="samples per Arrow message")
    bi.add_argument("--sources", type=int, default=100, help="source nodes (message keys)")
    bi.add_argument("--peers", type=int, default=10, help="destinations per source")
    bi.add_argument("--baseline-samples", type=int, default=20_000)
    bi.add_argument("--json", action="store_true")
    bs = bsub.add_parser("scoring", help="full rescoring: numba vs numpy vs plain Python")
    bs.add_argument("--jobs", type=int, default=10_000)
    bs.add_argument("--nodes", type=int, default=10_000)
    bs.add_argument("--endpoints", type=int, default=1000, help="distinct endpoints (data sources, repos, peers)")
    bs.add_argument("--json", action="store_true")
    bf = bsub.add_parser("forecast", help="forecast many 1-minute series (7 days of history) vs seasonal naive")
    bf.add_argument("--series", type=int, default=10_000)
    bf.add_argument("--days", type=int, default=7)
    bf.add_argument("--json", action="store_true")
    bb = bsub.add_parser("battery", help="battery sizing of a year of 1-minute power vs a per-sample reference")
    bb.add_argument("--samples", type=int, default=525_600)
    bb.add_argument("--window", type=int, default=15)
    bb.add_argument("--json", action="store_true")
    bk = bsub.add_parser("sink", help="window results through Kafka into DuckDB by the real sink")
    bk.add_argument("--results", type=int, default=500_000)
    bk.add_argument("--json", action="store_true")
    br = bsub.add_parser("reschedule", help="window result in -> reschedule event out, with running tasks")
    br.add_argument("--nodes", type=int, default=1000)
    br.add_argument("--peers", type=int, default=10, help="paths per node (x 4 metrics each)")
    br.add_argument("--tasks", type=int, default=1000)
    br.add_argument("--json", action="store_true")

    d = sub.add_parser("demo", help="broker + worker + simulated probes; print what flows")
    d.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    d.add_argument("--rate", type=float, default=100.0, help="probe rate per node pair, Hz")
    d.add_argument("--nodes-per-region", type=int, default=3)
    d.add_argument("--day-seconds", type=float, default=120.0, help="length of a simulated day (diurnal load)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        settings = load_settings()
        setup_logging(settings.log_level)
        return _COMMANDS[args.command](args, settings)
    except UsageError as exc:
        print(f"cnsched: error: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"cnsched: {exc}", file=sys.stderr)
        return 2
    except BrokerError as exc:
        print(f"cnsched: broker: {exc}", file=sys.stderr)
        return 1
    except StoreError as exc:
        print(f"cnsched: duckdb: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def cmd_broker(args, settings: Settings) -> int:
    if args.port is not None and not (0 < args.port < 65536):
        raise UsageError(f"--port must be 1..65535, got {args.port}")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedBroker(port=args.port, host=args.host) as bootstrap:
        if args.json:
            import json

            print(json.dumps({"bootstrap": bootstrap}), flush=True)
        else:
            print(f"KAFKA_BOOTSTRAP={bootstrap}", flush=True)
        stop.wait()
    return 0


def cmd_topics(args, settings: Settings) -> int:
    from streams.kafka import ensure_topics_sync

    _require_bootstrap(settings)
    created = ensure_topics_sync(settings)
    if args.json:
        import json

        print(json.dumps(created))
    else:
        for name, parts in created.items():
            print(f"{name}\t{parts}")
    return 0


def cmd_worker(args, settings: Settings) -> int:
    from faust import Worker

    from streams.app import create_app
    from streams.kafka import ensure_topics_sync, table_changelogs

    _require_bootstrap(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if not args.baseline:
        from streams.worker.windowing import warm_up

        t = time.monotonic()
        warm_up()
        log.info("kernels ready in %.1f s", time.monotonic() - t)
    partitions = ensure_topics_sync(settings)
    sample_partitions = partitions[settings.topic(PROBE_SAMPLES)]
    ensure_topics_sync(settings, (), table_changelogs(settings, sample_partitions))
    if args.baseline:
        from streams.dev.baseline import BASELINE_TOPIC, create_baseline_app

        ensure_topics_sync(settings, (BASELINE_TOPIC,))
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run above closed its loop
    if args.baseline:
        app, _ = create_baseline_app(settings)
    else:
        app, _, _ = create_app(settings, sample_partitions)
    worker = Worker(app, loglevel=settings.log_level, quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()  # runs until SIGINT/SIGTERM; exits the process
    return 0


def cmd_sink(args, settings: Settings) -> int:
    from streams.kafka import ensure_topics_sync
    from streams.runtime.sink_runner import run_sink

    _require_bootstrap(settings)
    ensure_topics_sync(settings)
    return asyncio.run(run_sink(settings))


def cmd_probe(args, settings: Settings) -> int:
    import json
    import re
    from pathlib import Path

    from schemas.compute import NODE_ID_PATTERN
    from streams.probe.agent import parse_peer, read_peers_file, run_agent

    if not re.match(NODE_ID_PATTERN, args.node):
        raise UsageError(f"--node {args.node!r} must match {NODE_ID_PATTERN}")
    if not 0 < args.rate <= 1000:
        raise UsageError("--rate must be in (0, 1000] probes per second")
    if args.timeout <= 0 or args.seconds < 0:
        raise UsageError("--timeout must be positive and --seconds not negative")
    try:
        listen = parse_peer(args.listen)
        peers = [parse_peer(p) for p in args.peer]
        if args.peers_file:
            peers += read_peers_file(Path(args.peers_file), args.node)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    if not peers:
        raise UsageError("no peers: give --peer or --peers-file")
    _require_bootstrap(settings)
    ifaces = args.iface or [i for i in _interfaces() if i != "lo"]

    async def main() -> dict:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.seconds:
            loop.call_later(args.seconds, stop.set)
        stats = await run_agent(settings, args.node, (listen.host, listen.port), peers, args.rate,
                                args.timeout, ifaces, args.link_gbps, stop)
        return vars(stats)

    try:
        stats = asyncio.run(main())
    except OSError as exc:
        print(f"cnsched: probe: {exc.strerror or exc} ({args.listen})", file=sys.stderr)
        return 1
    print(json.dumps(stats) if args.json else " ".join(f"{k}={v}" for k, v in stats.items() if k != "per_peer"))
    return 0


def _interfaces() -> list[str]:
    from pathlib import Path

    from streams.probe.agent import parse_net_dev

    try:
        return list(parse_net_dev(Path("/proc/net/dev").read_text()))
    except OSError:
        return []


def cmd_stats(args, settings: Settings) -> int:
    import json
    import math
    from pathlib import Path

    from streams.worker.offline import InputError, window_stats_offline

    size = args.window_seconds or settings.window_seconds
    step = args.step_seconds or (args.window_seconds if args.window_seconds else settings.window_step_seconds)
    lateness = settings.allowed_lateness_seconds if args.lateness_seconds is None else args.lateness_seconds
    if size < 1 or step < 1 or step > size:
        raise UsageError("window and step must be whole seconds with 1 <= step <= window")
    if lateness < 0:
        raise UsageError("--lateness-seconds must be >= 0")
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    try:
        results, counts = window_stats_offline(data, size, step, lateness, settings.hampel_k)
    except InputError as exc:
        print(f"cnsched: stats: {exc}", file=sys.stderr)
        return 1
    if counts["rejected"] or counts["late"]:
        print(f"cnsched: stats: {counts['samples']} samples, {counts['rejected']} rejected, "
              f"{counts['late']} late (dropped)", file=sys.stderr)
    if args.json:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                 for r in results]
        print(json.dumps(clean))
        return 0
    print(f"{'window_start':>14} {'src':>10} {'dst':>10} {'metric':>10} {'count':>7} {'lost':>5} "
          f"{'outl':>5} {'mean':>10} {'p50':>10} {'p95':>10} {'p99':>10}")
    for r in results:
        print(f"{r['window_start']:>14.0f} {r['src']:>10} {r['dst']:>10} {r['metric']:>10} "
              f"{r['count']:>7} {r['lost']:>5} {r['outliers']:>5} {r['mean']:>10.4g} {r['p50']:>10.4g} "
              f"{r['p95']:>10.4g} {r['p99']:>10.4g}")
    return 0


def cmd_bench(args, settings: Settings) -> int:
    import tempfile
    from pathlib import Path

    from streams.dev.bench import (
        bench_battery,
        bench_forecast,
        bench_ingest,
        bench_reschedule,
        bench_scoring,
        bench_sink,
    )

    if args.bench == "battery":
        if args.window < 1 or args.samples < args.window:
            raise UsageError("--window must be at least 1 and --samples at least --window")
        print_result(bench_battery(args.samples, args.window), args.json)
        return 0
    if args.bench == "forecast":
        if args.series < 1 or args.days < 2:
            raise UsageError("--series must be at least 1 and --days at least 2")
        print_result(bench_forecast(args.series, args.days), args.json)
        return 0
    if args.bench == "sink":
        if args.results < 1:
            raise UsageError("--results must be at least 1")
        if settings.kafka_bootstrap:
            print_result(asyncio.run(bench_sink(settings, args.results)), args.json)
        else:
            with EmbeddedBroker() as bootstrap:
                print_result(asyncio.run(bench_sink(settings.with_bootstrap(bootstrap), args.results)), args.json)
        return 0
    if args.bench == "reschedule":
        for name in ("nodes", "peers", "tasks"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name} must be at least 1")
        print_result(bench_reschedule(args.nodes, min(args.peers, args.nodes - 1) or 1, args.tasks), args.json)
        return 0
    if args.bench == "scoring":
        for name in ("jobs", "nodes", "endpoints"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name} must be at least 1")
        print_result(bench_scoring(args.jobs, args.nodes, args.endpoints), args.json)
        return 0
    for name in ("samples", "batch", "sources", "peers", "baseline_samples"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="cnsched-bench-"))

    async def run(s: Settings) -> dict:
        return await bench_ingest(s, args.samples, args.batch, args.sources, args.peers,
                                  args.baseline_samples, workdir)

    if settings.kafka_bootstrap:
        result = asyncio.run(run(settings))
    else:
        with EmbeddedBroker() as bootstrap:
            result = asyncio.run(run(settings.with_bootstrap(bootstrap)))
    print_result(result, args.json)
    return 0


def cmd_demo(args, settings: Settings) -> int:
    from streams.dev.demo import run_demo

    if args.seconds <= 0:
        raise UsageError("--seconds must be positive")
    if args.rate <= 0:
        raise UsageError("--rate must be positive")
    if args.nodes_per_region < 2 or args.day_seconds <= 0:
        raise UsageError("--nodes-per-region must be at least 2 and --day-seconds positive")
    if settings.kafka_bootstrap:
        # a cluster that outlives the demo remembers its tasks: this run's task ids are its own
        import uuid

        args.id_suffix = f"-{uuid.uuid4().hex[:4]}"
        return asyncio.run(run_demo(settings, args))
    with EmbeddedBroker() as bootstrap:
        log.info("embedded broker at %s", bootstrap)
        return asyncio.run(run_demo(settings.with_bootstrap(bootstrap), args))


def _require_bootstrap(settings: Settings) -> None:
    if not settings.kafka_bootstrap:
        raise ConfigError(
            "invalid configuration: KAFKA_BOOTSTRAP is not set (run 'cnsched broker' and export "
            "the address it prints, or point it at your Kafka cluster)"
        )


_COMMANDS = {
    "broker": cmd_broker,
    "worker": cmd_worker,
    "topics": cmd_topics,
    "sink": cmd_sink,
    "probe": cmd_probe,
    "stats": cmd_stats,
    "sql": cli_data.cmd_sql,
    "backtest": cli_data.cmd_backtest,
    "report": cli_data.cmd_report,
    "battery": cli_data.cmd_battery,
    "submit": cli_api.cmd_submit,
    "query": cli_api.cmd_query,
    "bench": cmd_bench,
    "demo": cmd_demo,
}


if __name__ == "__main__":
    sys.exit(main())
