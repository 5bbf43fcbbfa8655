"""`cnsched simulate`: replay a job trace over network measurements with every policy side by side
(streams.replay) and print, store (DuckDB sim_runs, sim_changes, sim_jobs) or emit JSON of the result."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

from streams.cli.common import UsageError, drawing
from streams.cli.progress import bar
from streams.config import Settings

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PHILLY = DATA / "jobs" / "philly" / "philly_data_training.csv"
SKYPLANE = DATA / "network" / "skyplane"
ITP = DATA / "jobs" / "itp" / "itp_raw_all_clusters.csv.gz"
RTT = DATA / "rtt" / "real_labelled"
MODELS = DATA / "models"


def add_parsers(sub) -> None:
    p = sub.add_parser("simulate", help="replay a job trace over network measurements, every policy side by side")
    p.add_argument("--jobs", default=None,
                   help=f"FORMAT:PATH, FORMAT philly, itp or generic; itp:PATH#CLUSTER replays one of ITP's ten "
                        f"clusters (default philly:{PHILLY}; with --services itp:{ITP})")
    p.add_argument("--network", default=f"skyplane:{SKYPLANE / 'latency.csv.gz'},{SKYPLANE / 'throughput.csv.gz'}",
                   help="skyplane:LATENCY,THROUGHPUT or generic:PATH")
    p.add_argument("--limit", type=int, default=0, help="replay the first N jobs only (0: all)")
    p.add_argument("--sites", type=int, default=4)
    p.add_argument("--regions", choices=("best", "random"), default="best",
                   help="which measured regions the sites are: the best-connected (default) or drawn at random "
                        "per seed among those measured with each other (issue 53, E1)")
    p.add_argument("--racks-per-site", type=int, default=4)
    p.add_argument("--nodes-per-rack", type=int, default=8)
    p.add_argument("--cards-per-node", type=int, default=8)
    p.add_argument("--oversubscription", type=float, default=4.0)
    p.add_argument("--epoch", type=float, default=300.0, help="seconds per probe window")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (intervals are over seeds)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="policy x seed runs at once, in processes (default: the machine's cores); results do "
                        "not depend on it")
    p.add_argument("--oracle", action="store_true",
                   help="an ablation: every policy is told each job's trace duration instead of its requested limit")
    p.add_argument("--limit-factor", type=float, default=5.0,
                   help="a job's requested limit is its run time x U[1, F], rounded up to round values")
    p.add_argument("--rtt-dynamics", default=str(RTT), metavar="DIR|none",
                   help="real RTT series (epoch;rtt;cp files) driving every site pair over time, assigned by "
                        "seed; 'none': the network stays as measured (a generic network with t_s uses its own "
                        f"series instead) (default {RTT})")
    p.add_argument("--models", default=None, metavar="DIR|none",
                   help="measured models (pollux/ and gavel/ as upstream ships them) each job draws its "
                        "communication share and card speed from; 'none': the assumed ones (a share drawn "
                        f"from 0.1-0.5, every job 1.5x on the newer card) (default {MODELS}, or the assumed "
                        "ones where that is not there; the run's config says which)")
    p.add_argument("--reroutes-per-day", type=float, default=0.0,
                   help="synthetic reroutes per site pair and day (RTT x 2 for 4 h); off by default")
    p.add_argument("--bursts-per-day", type=float, default=0.0,
                   help="synthetic loss bursts (5 %% for 1 h) per site pair and day; off by default")
    p.add_argument("--policies", default="ours,topology,compute-only",
                   help="of ours, ours-static, compute-only, topology, random, ours-quotas (teams with quotas), "
                        "fifo (strict first come, first served)")
    p.add_argument("--failures-per-node-day", type=float, default=0.002)
    p.add_argument("--teams", type=int, default=6, help="users hashed into this many teams (ours-quotas, by team)")
    p.add_argument("--quota-max-factor", type=float, default=0.0,
                   help="ours-quotas: a team may hold this times its guarantee; 0: no maximum (default)")
    p.add_argument("--card-kw", type=float, default=0.7, help="a working card's draw (the sites' power curves)")
    p.add_argument("--ramp-limit", type=float, default=0.0,
                   help="power-aware starts: a site adds at most this many MW a minute (0: no limit)")
    p.add_argument("--power-csv", metavar="DIR", help="write each policy's site power curves (seed 0) here, "
                   "<policy>-<site>.csv with minute,power_mw: what cnsched battery sizes")
    p.add_argument("--png", help="write the JCT distributions of network-sensitive jobs per policy here")
    p.add_argument("--no-store", action="store_true", help="do not write the result to DuckDB")
    p.add_argument("--db", default=None, help="the DuckDB file for the result (default CNSCHED_REPLAY_DUCKDB_PATH, "
                                              "cnsched-replay.duckdb: never the live audit database)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress (there is none off a terminal either)")
    _add_data_options(p)
    from streams.cli.simulate_requests import add_options

    add_options(p)


def _add_data_options(p) -> None:
    d = p.add_argument_group("variants, data and experiments")
    d.add_argument("--ablations", nargs="?", const="all", metavar="NAMES",
                   help="instead of the headline: the replay with one ingredient taken away at a time (all, or "
                        "of as-is, one-site, no-data, equal-cards, static-network, no-migrations, oracle, first-come, "
                        "assumed-timing, no-staging, no-reuse, no-predictions, metered-speeds)")
    d.add_argument("--sweep", action="store_true",
                   help="instead of the headline: the assumed parameters (communication share, gradient size, data "
                        "size) one at a time, ours against each baseline for each")
    d.add_argument("--data-share", type=float, default=0.3, help="jobs reading data from a home site")
    d.add_argument("--data-gb", type=float, default=500.0, help="what a data job reads from its home site, GB")
    d.add_argument("--datasets", choices=("user", "job"), default="user",
                   help="what a data job reads: its user's one data set (default) or data of its own")
    d.add_argument("--no-staging", action="store_true",
                   help="ours never copies a job's data to the site it runs at (issue 53's E2; by default it "
                        "does, and later jobs reading the same data load the copy)")
    d.add_argument("--uplink-dynamics", action="store_true",
                   help="each rack's uplink driven by a real RTT series of its own too (issue 53's E5: RTT x the "
                        "series' ratio to its median, capacity / it); needs --rtt-dynamics")
    d.add_argument("--experiment", choices=("e1", "e2", "e5"),
                   help="issue 53's experiment: its worlds in turn, each option it does not set as given "
                        "(streams/cli/experiments.py; the README's tables)")


def _jobs(spec: str):
    """The job trace ``FORMAT:PATH`` names (bad input: one usage line)."""
    from streams.replay.traces import TraceError, load_generic_jobs, load_itp, load_philly

    fmt, _, path = spec.partition(":")
    loaders = {"philly": load_philly, "itp": load_itp, "generic": load_generic_jobs}
    if fmt not in loaders or not path:
        raise UsageError(f"--jobs: unknown trace format {fmt!r}: use philly:PATH, itp:PATH[#CLUSTER] or generic:PATH")
    path, _, cluster = path.partition("#") if fmt == "itp" else (path, "", "")
    try:
        return loaders[fmt](path, cluster) if cluster else loaders[fmt](path)
    except TraceError as exc:
        raise UsageError(str(exc)) from None


NO_DATA = ("the default data is ../shared/data beside this checkout ({}), which is not there: pass --jobs "
           "philly:PATH (Microsoft's Philly trace, msr-fiddle/philly-traces; this extract: DIR-LAB/"
           "Gen-Parallel-Workloads Philly/training_data/philly_data_training.csv) and --network "
           "skyplane:LATENCY,THROUGHPUT (skyplane-project/skyplane profiles/latency.csv and throughput.csv), "
           "and --rtt-dynamics DIR (WenqinSHAO/rtt dataset/real_trace_labelled) or none")


def _load(args):
    from streams.replay.traces import TraceError, load_generic_network, load_skyplane

    if not DATA.is_dir() and (args.jobs is None or args.network.startswith(f"skyplane:{SKYPLANE}")):
        raise UsageError(NO_DATA.format(DATA))
    trace = _jobs(args.jobs or f"philly:{PHILLY}")
    nfmt, _, npath = args.network.partition(":")
    try:
        if nfmt == "skyplane" and npath.count(",") == 1:
            paths = load_skyplane(*npath.split(","))
        elif nfmt == "generic" and npath:
            paths = load_generic_network(npath)
        else:
            raise UsageError(f"--network: {args.network!r}: use skyplane:LATENCY,THROUGHPUT or generic:PATH")
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    return trace, paths


def _replay_with_progress(args, trace, cluster, cfg, policies):
    """Every policy over every seed, with a bar of jobs replayed (on a terminal) and a line per run."""
    from streams.replay.results import replay
    from streams.replay.traces import TraceError

    quiet = args.json or args.quiet
    jobs_bar = bar(len(policies) * args.seeds * len(trace), f"replay {policies[0]} seed 0", quiet, unit="job")

    def finished_run(policy: str, seed: int, wall_s: float) -> None:
        if not quiet:
            print(f"  {policy} seed {seed}: {wall_s:.1f} s", file=sys.stderr)
        k = (policies.index(policy) + 1) % len(policies)
        jobs_bar.set_description(f"replay {policies[k]} seed {seed + (k == 0)}")

    try:
        return replay(trace, cluster, cfg, policies, tuple(range(args.seeds)), progress=finished_run,
                      tick=jobs_bar.update, rtt_series=None if cluster.series is not None else _rtt(args),
                      workers=args.workers)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    finally:
        jobs_bar.close()


def _rtt(args) -> list | None:
    """The real RTT series of ``--rtt-dynamics`` (None: 'none'); bad input: one usage line."""
    if args.rtt_dynamics == "none":
        return None
    from streams.analytics.rtt_series import SeriesError, load_dir

    try:
        return load_dir(args.rtt_dynamics)
    except (SeriesError, OSError) as exc:
        raise UsageError(f"--rtt-dynamics: {exc}") from None


def _models(args):
    """The measured models of ``--models`` (None: 'none', or no option and no default data); bad input: one
    usage line."""
    if args.models == "none" or (args.models is None and not MODELS.is_dir()):
        return None
    from streams.replay.models import load_models
    from streams.replay.traces import TraceError

    try:
        return load_models(args.models or MODELS)
    except TraceError as exc:
        raise UsageError(f"--models: {exc}") from None


def _jct_png(path: str, jobs: list[dict], policies) -> None:
    import numpy as np

    from streams.render.replay import jct_png

    with drawing("--png", path):
        jct_png({p: np.array([r["jct_s"] for r in jobs if r["policy"] == p and r["class"] == "sensitive"
                              and r["jct_s"] is not None]) for p in policies}, path)


def _config(args):
    """(policies, ClusterSpec, SimConfig) from the options; bad values: one usage line."""
    from streams.replay.cluster import ClusterSpec
    from streams.replay.engine import POLICIES
    from streams.replay.world import SimConfig

    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        raise UsageError(f"--policies: unknown {bad[0] if bad else '(none)'!r}; known: {', '.join(POLICIES)}")
    if args.seeds < 1 or args.limit < 0 or args.workers < 1:
        raise UsageError("--seeds and --workers must be at least 1 and --limit at least 0")
    try:
        spec = ClusterSpec(args.sites, args.racks_per_site, args.nodes_per_rack, args.cards_per_node,
                           oversubscription=args.oversubscription, regions=args.regions)
        cfg = SimConfig(cluster=spec, epoch_s=args.epoch, data_share=args.data_share, data_gb=args.data_gb,
                        staging=not args.no_staging, datasets=args.datasets, uplink_dynamics=args.uplink_dynamics,
                        failures_per_node_day=args.failures_per_node_day, teams=args.teams,
                        quota_max_factor=args.quota_max_factor, card_kw=args.card_kw,
                        ramp_limit_mw_per_min=args.ramp_limit, estimate="oracle" if args.oracle else "limit",
                        limit_factor=args.limit_factor, reroutes_per_day=args.reroutes_per_day,
                        bursts_per_day=args.bursts_per_day, models=_models(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return policies, spec, cfg


def cmd_simulate(args, settings: Settings) -> int:
    if args.services or args.requests:
        from streams.cli.simulate_requests import served

        return served(args)
    if getattr(args, "experiment", None):
        from streams.cli.experiments import run_experiment

        return run_experiment(args, settings)
    from streams.replay.cluster import build_cluster
    from streams.replay.results import job_table
    from streams.replay.traces import TraceError, head

    policies, spec, cfg = _config(args)
    trace, paths = _load(args)
    if args.limit:
        trace = head(trace, args.limit)
    if args.ablations or args.sweep:
        from streams.cli.ablate import run_ablations

        return run_ablations(args, trace, paths, cfg, None if paths.series is not None else _rtt(args))
    t0 = time.perf_counter()
    try:
        cluster = build_cluster(paths, spec)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    run = _replay_with_progress(args, trace, cluster, cfg, policies)
    result, rows, delta, config = _result(args, trace, cluster, run, cfg, t0, settings)
    if args.png:
        _jct_png(args.png, job_table(run), policies)
        result["png"] = args.png
    if args.power_csv:
        result["power_csv"] = _power_csv(args.power_csv, run, cluster.sites)
    if not args.no_store:
        from sinks.duckdb_store import DuckStore

        run_id = f"sim-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        result["run_id"] = run_id
        store_rows = [{**r, "created_at": time.time(), "trace": args.jobs, "network": args.network,
                       "config": json.dumps(config, default=str)} for r in rows]
        result["db"] = str(args.db or settings.replay_duckdb_path)
        with DuckStore.open(result["db"]) as store:
            store.write_replay(run_id, store_rows, delta, job_table(run), result["headline"])
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        _print(result)
    return 0


def _result(args, trace, cluster, run, cfg, t0: float, settings: Settings) -> tuple[dict, list, list, dict]:
    """(the result document, its summary rows, its changes, the configuration) of a replay."""
    from streams.replay.results import changes, power_summary, summary
    from streams.replay.stats import excluded, headline
    from streams.replay.teams import team_summary
    from streams.replay.traces import FILL_RULE

    rows = summary(run, len(cluster.node_ids) * cfg.cluster.cards_per_node)
    delta = changes(run)
    drawn = args.regions == "random"
    config = {**cfg.flat(), "jobs": args.jobs, "network": args.network,
              "sites": {str(k): v for k, v in run.sites.items()} if drawn else cluster.sites,
              "limit": args.limit, "seeds": args.seeds, "fill_rule_missing_gbps": FILL_RULE,
              "network_over_time": "the network's own t_s series" if cluster.series is not None
              else ("none" if args.rtt_dynamics == "none" else f"real RTT series from {args.rtt_dynamics}")}
    result = {"trace": trace.source, "jobs": len(trace), "skipped": trace.skipped, "nodes": len(cluster.node_ids),
              "sites": [f"{len(cluster.sites)} drawn per seed"] if drawn else cluster.sites,
              "wall_s": round(time.perf_counter() - t0, 1), "config": config, "summary": rows, "changes": delta,
              "headline": headline(run), "excluded": excluded(run), "teams": team_summary(run),
              "power": power_summary(run, settings.card_prices.get("*", 1.0), settings.energy_price_per_mwh)}
    return result, rows, delta, config


def _print(result: dict) -> None:
    print(f"replay of {result['jobs']} {result['trace']} jobs on {result['nodes']} nodes at "
          f"{', '.join(result['sites'])} ({result['wall_s']} s)")
    if result.get("skipped"):
        print("skipped: " + ", ".join(f"{n} {why.replace('_', '-')} jobs" for why, n in result["skipped"].items())
              + " (not jobs for a GPU scheduler)")
    head = ("policy", "class", "jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s", "wait_mean_s",
            "card_utilisation", "migrations", "restarts", "unschedulable")
    cfg = result["config"]
    print("config: " + ", ".join(f"{k}={v}" for k, v in cfg.items() if k not in ("jobs", "network", "sites")))
    print("  ".join(f"{h:>14}" for h in head))
    for r in result["summary"]:
        print("  ".join(f"{_cell(r[h]):>14}" for h in head))
    _print_headline(result)
    print("\nmean JCT change (negative: sooner), 95 % bootstrap interval")
    for c in result["changes"]:
        print(f"  {c['policy']:>13} vs {c['against']:<13} {c['class']:<10} {c['jct_change']:+8.1%} "
              f"[{c['ci_low']:+.1%}, {c['ci_high']:+.1%}] over {c['interval_over']}")
    print("\nby team: Jain's index of the teams' mean slowdown (1: all alike), preemptions, work they lost")
    for p, t in result["teams"].items():
        worst = max(t["teams"].items(), key=lambda kv: kv[1]["slowdown_mean"], default=("-", {"slowdown_mean": 0}))
        print(f"  {p:>13} jain {t['jain_slowdown']:.3f}  preemptions {t['preemptions']}  lost "
              f"{t['lost_card_hours']:.1f} card-h  quota violations {t['quota_violations']}  worst team "
              f"{worst[0]} (slowdown {worst[1]['slowdown_mean']:.2f})")
    print("\ncost (card-hours held x the card-hour price + energy x CNSCHED_ENERGY_PRICE_PER_MWH) and site power "
          "(the worst site; battery sized on its curve for the ramp limit, 15-minute blocks)")
    for p, f in result["power"].items():
        print(f"  {p:>13} cost {f['cost']:,.0f} ({f['card_hours']:,.0f} card-h, {f['energy_mwh']:,.1f} MWh)  "
              f"steepest rise {f['max_ramp_mw_per_min']:.3f} MW/min  minutes over the limit "
              f"{f['minutes_over_limit']:.0f}  peak {f['peak_mw']:.2f} MW  battery {f['battery_mw']:.3f} MW / "
              f"{f['battery_mwh']:.3f} MWh")
    if "run_id" in result:
        print(f"\nstored in {result['db']} as {result['run_id']}: CNSCHED_DUCKDB_PATH={result['db']} cnsched sql "
              f"\"SELECT * FROM sim_runs WHERE run_id = '{result['run_id']}'\"")


def _print_headline(result: dict) -> None:
    rows = [r for r in result["headline"] if r["policy"] == "ours"]
    if not rows:
        return
    print(f"\nheadline: ours against each baseline, per job kind; jobs the trace says completed "
          f"({result['excluded']['not_completed']} others per seed run but are not counted); change of the "
          "mean per seed, 95 % t-interval over seeds; paired: the median per-job ratio (wait: difference, s); "
          "top10: the ten largest differences' share of the total")
    print(f"  {'against':<13}{'kind':<8}{'metric':<7}{'jobs':>6}{'change':>8} {'95 % interval':<19}{'mean s':>11}"
          f"{'vs':>11}{'p50 s':>11}{'vs':>11}{'p95 s':>11}{'vs':>11}{'paired':>9}{'top10':>7}")
    for r in rows:
        ci = "" if r["ci_low"] != r["ci_low"] else f"[{r['ci_low']:+.1%}, {r['ci_high']:+.1%}]"
        cells = "".join(f"{r[k]:>11,.0f}" for k in ("mean_policy_s", "mean_against_s", "p50_policy_s", "p50_against_s",
                                                     "p95_policy_s", "p95_against_s"))
        change = "n/a" if r["change"] != r["change"] else f"{r['change']:+.1%}"
        share = "n/a" if r["top10_share"] != r["top10_share"] else f"{r['top10_share']:.0%}"
        print(f"  {r['against']:<13}{r['kind']:<8}{r['metric']:<7}{r['jobs']:>6}{change:>8} {ci:<19}{cells}"
              f"{r['paired_median']:>9.3f}{share:>7}")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"
    return str(v)


COMMANDS = {"simulate": cmd_simulate}


def _power_csv(folder: str, run, sites: list[str]) -> list[str]:
    """Each policy's site curves of the first seed as CSV files (minute, power_mw)."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for p in run.policies:
            curves = run.outcomes[(p, run.seeds[0])].power_mw
            for s, site in enumerate(sites):
                path = out / f"{p}-{site}.csv"
                rows = "".join(f"{m},{v:.6f}\n" for m, v in enumerate(curves[s]))
                path.write_text("minute,power_mw\n" + rows)
                written.append(str(path))
    except OSError as exc:
        raise UsageError(f"--power-csv: {exc}") from None
    return written
