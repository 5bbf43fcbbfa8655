"""`cnsched bench ...`: each benchmark runs ours beside its baseline in one run and prints ratios."""

from __future__ import annotations

import asyncio

from streams.cli.common import Parser, UsageError, print_result
from streams.config import Settings
from streams.runtime.broker import EmbeddedBroker


def add_parsers(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks: ours beside the baseline, with ratios")
    bsub = bench.add_subparsers(dest="bench", metavar="BENCH", parser_class=Parser, required=True)
    for p in _path_benches(bsub) + _analysis_benches(bsub):
        p.add_argument("--json", action="store_true")
    fz = sub.add_parser("fuzz", help="hostile messages on every input topic through a real worker and sink")
    fz.add_argument("--messages", type=int, default=100_000, help="hostile messages (plus one valid in ten)")
    fz.add_argument("--seed", type=int, default=0)
    fz.add_argument("--contract-examples", type=int, default=100,
                    help="schemathesis examples per operation, stateful phase included (0: no contract run)")
    fz.add_argument("--json", action="store_true")


def _path_benches(bsub) -> list:
    """The benchmarks of the live path: ingest, scoring, sink, rescheduling, deciding, the API."""
    bi = bsub.add_parser("ingest", help="end-to-end ingest vs a one-sample-per-message agent vs the kernel")
    bi.add_argument("--samples", type=int, default=5_000_000)
    bi.add_argument("--batch", type=int, default=1000, help="samples per Arrow message")
    bi.add_argument("--sources", type=int, default=100, help="source nodes (message keys)")
    bi.add_argument("--peers", type=int, default=10, help="destinations per source")
    bi.add_argument("--baseline-samples", type=int, default=20_000)
    bs = bsub.add_parser("scoring", help="full rescoring: numba vs numpy vs plain Python")
    bs.add_argument("--jobs", type=int, default=10_000)
    bs.add_argument("--nodes", type=int, default=10_000)
    bs.add_argument("--endpoints", type=int, default=1000, help="distinct endpoints (data sources, repos, peers)")
    bk = bsub.add_parser("sink", help="window results through Kafka into DuckDB by the real sink")
    bk.add_argument("--results", type=int, default=500_000)
    bret = bsub.add_parser("retention", help="the DuckDB file day by day: kept whole vs the sink's retention")
    bret.add_argument("--series", type=int, default=200, help="paths, each a 10-s window all day")
    bret.add_argument("--days", type=int, default=12, help="simulated days")
    bret.add_argument("--raw-days", type=float, default=2.0)
    bret.add_argument("--minute-days", type=float, default=4.0)
    bret.add_argument("--hour-days", type=float, default=8.0)
    br = bsub.add_parser("reschedule", help="window result in -> reschedule event out, with running tasks")
    br.add_argument("--nodes", type=int, default=1000)
    br.add_argument("--peers", type=int, default=10, help="paths per node (x 4 metrics each)")
    br.add_argument("--tasks", type=int, default=1000)
    bd = bsub.add_parser("decide", help="decisions per second: a burst one call each vs one batch")
    bd.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    bd.add_argument("--tasks", type=int, default=500, help="tasks per burst")
    bd.add_argument("--baseline-rev", help="the batch of ours beside this git revision's, in turn, and where our "
                    "time goes (issue 52 compares with 56fcf1d)")
    bd.add_argument("--rounds", type=int, default=3, help="with --baseline-rev: timed bursts per revision (best)")
    bd.add_argument("--rack-size", type=int, default=8, help="nodes per rack (every rack pair probed; 40 for 50,000 "
                    "nodes: 1.6 million rack-level paths)")
    bn = bsub.add_parser("netstate", help="window results into the network view: one message at a time vs steps")
    bn.add_argument("--paths", type=int, default=20_000, help="paths, each with a window result per metric (4)")
    bn.add_argument("--step", type=int, default=200, help="messages per step (CNSCHED_TAKE_MAX_MESSAGES)")
    bn.add_argument("--baseline-rev", help="the step of ours beside this git revision's, each in its own process")
    bn.add_argument("--rounds", type=int, default=3, help="with --baseline-rev: timed passes per revision (best)")
    ba = bsub.add_parser("api", help="a burst of concurrent GETs: ours beside an older revision's worker")
    ba.add_argument("--nodes", type=int, default=200, help="compute reports the workers hold")
    ba.add_argument("--requests", type=int, default=1000, help="concurrent GETs per path")
    ba.add_argument("--rounds", type=int, default=2, help="workers of each revision, in turn (medians)")
    ba.add_argument("--baseline-rev", default="6fdafa7", help="the git revision beside ours")
    return [bi, bs, bk, bret, br, bd, bn, ba]


def _analysis_benches(bsub) -> list:
    """The benchmarks of the analyses: forecasts, battery sizing, degradation detection."""
    bf = bsub.add_parser("forecast", help="forecast accuracy and speed beside last value, seasonal naive, AutoETS")
    bf.add_argument("--series", type=int, default=10_000, help="diurnal 1-minute series")
    bf.add_argument("--days", type=int, default=7)
    bf.add_argument("--ets-series", type=int, default=20, help="diurnal series AutoETS also forecasts (slow)")
    bf.add_argument("--rtt-dir", default=None, help="labelled RTT traces (default ../shared/data/rtt/artificial_labelled)")
    bf.add_argument("--no-real", action="store_true", help="the synthetic diurnal class only")
    bb = bsub.add_parser("battery", help="battery sizing of a year of 1-minute power vs a per-sample reference")
    bb.add_argument("--samples", type=int, default=525_600)
    bb.add_argument("--window", type=int, default=15)
    bt = bsub.add_parser("detect", help="degradation detector vs the 'latency doubles' rule on labelled RTT traces")
    bt.add_argument("--rtt-dir", default=None, help="labelled RTT traces (default ../shared/data/rtt/artificial_labelled)")
    bt.add_argument("--min-ratio", type=float, default=1.2, help="rises that count as events (default 1.2x)")
    bt.add_argument("--per-file", action="store_true", help="also the figures of every file")
    bt.add_argument("--cv", action="store_true", help="instead: leave-files-out cross-validation of the "
                    "threshold choice (streams/dev/bench/detect_cv.py; a minute or two)")
    bt.add_argument("--method", choices=("floor", "cusum", "bocpd"), default="floor",
                    help="--cv: the floor rule of core/detect.py, a CUSUM on log RTT (detect_cusum.py), or "
                         "Bayesian online change points on log RTT (detect_bocpd.py)")
    bt.add_argument("--also", default=None, help="--cv: a second labelled set every chosen policy must hold "
                    "(>= 85 %% within 2 windows at <= 0.05); default the artificial traces, 'none' for no second set")
    bt.add_argument("--folds", type=int, default=5)
    bt.add_argument("--target", type=float, default=0.05, help="--cv: strict false alarms per path-day allowed")
    bo = bsub.add_parser("routes", help="a service's routing weights: the worker's computation's p99 against 100 ms, "
                                        "the numba split beside its plain reference")
    bo.add_argument("--nodes", type=int, default=1000)
    bo.add_argument("--replicas", type=int, default=64)
    bo.add_argument("--origins", type=int, default=20)
    bo.add_argument("--rounds", type=int, default=50)
    bp = bsub.add_parser("replay", help="the replay's wall time: ours beside an older revision, results compared")
    bp.add_argument("--baseline-rev", default="5f5b6d2", help="the git revision beside ours")
    bp.add_argument("--limit", type=int, default=0, help="the first N jobs of the trace (0: all)")
    bp.add_argument("--workers", type=int, default=2, help="simulate's processes")
    bp.add_argument("--rounds", type=int, default=1, help="runs of each revision, in turn (medians)")
    bp.add_argument("--policies", default="ours,topology,compute-only")
    return [bf, bb, bt, bo, bp]


def _bench_routes(args) -> int:
    from streams.dev.bench.routes import bench_routes

    for name in ("nodes", "replicas", "origins", "rounds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.replicas > args.nodes:
        raise UsageError("--replicas at most --nodes (a replica a node)")
    print_result(bench_routes(args.nodes, args.replicas, args.origins, args.rounds), args.json)
    return 0


def _bench_replay(args) -> int:
    from streams.dev.bench.replay import bench_replay
    from streams.replay.engine import POLICIES

    for name in ("workers", "rounds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.limit < 0:
        raise UsageError("--limit must be at least 0 (0: the whole trace)")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies or any(p not in POLICIES for p in policies):
        raise UsageError(f"--policies: a comma-separated list of {', '.join(POLICIES)}")
    print_result(bench_replay(args.baseline_rev, args.limit, args.workers, args.rounds, policies), args.json)
    return 0


def _bench_forecast(args) -> int:
    from pathlib import Path

    from streams.analytics.rtt_series import SeriesError
    from streams.dev.bench.forecast import bench_forecast

    if args.series < 1 or args.days < 2 or args.ets_series < 0:
        raise UsageError("--series must be at least 1, --days at least 2 and --ets-series at least 0")
    if args.rtt_dir is not None and not Path(args.rtt_dir).is_dir():
        raise UsageError(f"--rtt-dir {args.rtt_dir}: not a directory")
    kw = {"rtt_dir": None} if args.no_real else ({} if args.rtt_dir is None else {"rtt_dir": args.rtt_dir})
    try:
        print_result(bench_forecast(args.series, args.days, ets_series=args.ets_series, **kw), args.json)
    except SeriesError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _bench_detect(args) -> int:
    from pathlib import Path

    from streams.dev.bench.detect import DEFAULT_RTT_DIR, bench_detect

    rtt_dir = args.rtt_dir or DEFAULT_RTT_DIR
    if not Path(rtt_dir).is_dir():
        raise UsageError(f"--rtt-dir {rtt_dir}: not a directory (the labelled RTT traces of ../shared/data/rtt)")
    if args.min_ratio <= 1:
        raise UsageError("--min-ratio must be above 1")
    if args.folds < 2 or args.target < 0:
        raise UsageError("--folds must be at least 2 and --target at least 0")
    if args.also not in (None, "none") and not Path(args.also).is_dir():
        raise UsageError(f"--also {args.also}: not a directory")
    from streams.analytics.rtt_series import SeriesError, load_dir
    from streams.dev.bench.detect_cv import cross_validate

    try:
        if args.cv:
            series = load_dir(rtt_dir)
            if len(series) < args.folds:
                raise UsageError(f"--cv needs at least --folds {args.folds} files; {rtt_dir} has {len(series)}")
            second = _second_set(rtt_dir, args.also)
            print_result(cross_validate(series, args.min_ratio, args.folds, args.target, method=args.method,
                                        second=second), args.json)
        else:
            print_result(bench_detect(rtt_dir, args.min_ratio, args.per_file), args.json)
    except SeriesError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _second_set(rtt_dir: str, also: str | None) -> list:
    """The set a chosen policy must also hold: ``--also``, else the artificial traces when the
    chosen ones are another directory ("none": no second set)."""
    from pathlib import Path

    from streams.analytics.rtt_series import load_dir
    from streams.dev.bench.detect import DEFAULT_RTT_DIR

    path = DEFAULT_RTT_DIR if also is None else also
    if path == "none" or not Path(path).is_dir() or Path(path).resolve() == Path(rtt_dir).resolve():
        return []  # (--also was checked to be a directory)
    return load_dir(path)


def _bench_decide(args) -> int:
    from streams.dev.bench.decide import bench_decide

    if args.tasks < 1 or min(args.nodes) < 1 or args.rounds < 1 or args.rack_size < 1:
        raise UsageError("--nodes, --tasks, --rounds and --rack-size must be at least 1")
    if args.baseline_rev:
        from streams.dev.bench.decide_rev import bench_decide_rev

        print_result(bench_decide_rev(args.baseline_rev, tuple(args.nodes), args.tasks, args.rounds, args.rack_size),
                     args.json)
        return 0
    print_result(bench_decide(tuple(args.nodes), args.tasks, rack=args.rack_size), args.json)
    return 0


def _bench_retention(args) -> int:
    from streams.dev.bench.retention import bench_retention

    if args.series < 1 or args.days < 1:
        raise UsageError("--series and --days must be at least 1")
    if not 0 < args.raw_days <= args.minute_days <= args.hour_days:
        raise UsageError("retention must grow: 0 < --raw-days <= --minute-days <= --hour-days")
    print_result(bench_retention(args.series, args.days, args.raw_days, args.minute_days, args.hour_days), args.json)
    return 0


def _bench_api(args, settings: Settings) -> int:
    from streams.dev.bench.api import bench_api

    for name in ("nodes", "requests", "rounds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")

    def run(s: Settings) -> dict:
        return asyncio.run(bench_api(s, args.nodes, args.requests, args.rounds, args.baseline_rev))

    if settings.kafka_bootstrap:
        print_result(run(settings), args.json)
    else:
        with EmbeddedBroker() as bootstrap:
            print_result(run(settings.with_bootstrap(bootstrap)), args.json)
    return 0


def cmd_bench(args, settings: Settings) -> int:
    import tempfile
    from pathlib import Path

    from streams.dev.bench.battery import bench_battery
    from streams.dev.bench.ingest import bench_ingest
    from streams.dev.bench.reschedule import bench_reschedule
    from streams.dev.bench.scoring import bench_scoring
    from streams.dev.bench.sink import bench_sink

    if args.bench == "battery":
        if args.window < 1 or args.samples < args.window:
            raise UsageError("--window must be at least 1 and --samples at least --window")
        print_result(bench_battery(args.samples, args.window), args.json)
        return 0
    own = {"forecast": _bench_forecast, "decide": _bench_decide, "detect": _bench_detect, "replay": _bench_replay,
           "retention": _bench_retention, "routes": _bench_routes}
    if args.bench in own:
        return own[args.bench](args)
    if args.bench == "sink":
        if args.results < 1:
            raise UsageError("--results must be at least 1")
        if settings.kafka_bootstrap:
            print_result(asyncio.run(bench_sink(settings, args.results)), args.json)
        else:
            with EmbeddedBroker() as bootstrap:
                print_result(asyncio.run(bench_sink(settings.with_bootstrap(bootstrap), args.results)), args.json)
        return 0
    if args.bench == "api":
        return _bench_api(args, settings)
    if args.bench == "reschedule":
        for name in ("nodes", "peers", "tasks"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name} must be at least 1")
        print_result(bench_reschedule(args.nodes, min(args.peers, args.nodes - 1) or 1, args.tasks), args.json)
        return 0
    if args.bench == "netstate":
        from streams.dev.bench.netstate import bench_netstate

        for name in ("paths", "step", "rounds"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name} must be at least 1")
        if args.baseline_rev:
            from streams.dev.bench.netstate import bench_netstate_rev

            print_result(bench_netstate_rev(args.baseline_rev, args.paths, args.step, args.rounds), args.json)
            return 0
        print_result(bench_netstate(args.paths, args.step), args.json)
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


def cmd_fuzz(args, settings: Settings) -> int:
    """Exit 1 when the campaign found a crash, a vanished message or a wrong window, or schemathesis a
    contract failure."""
    import tempfile
    import uuid
    from pathlib import Path

    from streams.dev.contract import run_contract
    from streams.dev.fuzz import passed, run_fuzz

    if args.messages < 1:
        raise UsageError("--messages must be at least 1")
    if args.contract_examples < 0:
        raise UsageError("--contract-examples must be at least 0")
    workdir = Path(tempfile.mkdtemp(prefix="cnsched-fuzz-"))

    def isolated(name: str) -> Settings:
        run = uuid.uuid4().hex[:8]
        (workdir / name).mkdir()
        return settings.model_copy(update={"topic_prefix": f"{settings.topic_prefix}{name}{run}.",
                                           "app_id": f"cnsched-{name}-{run}", "duckdb_path": workdir / name / "x.duckdb",
                                           "data_dir": workdir / name / "data"})

    async def both(bootstrap: str | None) -> dict:
        def at(s: Settings) -> Settings:
            return s if bootstrap is None else s.with_bootstrap(bootstrap)

        result = await run_fuzz(at(isolated("fuzz")), args.messages, args.seed, workdir / "fuzz")
        if args.contract_examples:
            result["contract"] = await run_contract(at(isolated("contract")), workdir / "contract",
                                                    args.contract_examples, seed=args.seed, stateful=True)
        return result

    if settings.kafka_bootstrap:
        result = asyncio.run(both(None))
    else:
        with EmbeddedBroker() as bootstrap:
            result = asyncio.run(both(bootstrap))
    result["logs"] = str(workdir)
    contract = result.get("contract", {"passed": True})
    print_result(result, args.json)
    return 0 if passed(result) and contract["passed"] else 1


COMMANDS = {"bench": cmd_bench, "fuzz": cmd_fuzz}
