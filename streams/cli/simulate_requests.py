"""`cnsched simulate --requests`: the request-routing replay (streams.replay.requests) — a real inference
request trace routed over replicas in regions drawn from the Skyplane matrix, ours against each
baseline — and `--services`' options (streams/cli/simulate_services.py)."""

from __future__ import annotations

import json
import sys

from streams.cli.common import UsageError
from streams.cli.simulate import DATA

AZURE = DATA / "inference" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"


def add_options(p) -> None:
    """--services' and --requests' options (simulate's parser)."""
    s = p.add_argument_group("elastic services (--services)")
    s.add_argument("--services", action="store_true",
                   help="replay an elastic service instead: the trace's submissions as its requests, every "
                        "scaling policy side by side")
    s.add_argument("--service-step", type=float, default=300.0, help="seconds per control step and rate bin")
    s.add_argument("--service-load-s", type=float, default=600.0, help="a new replica's image pull and model load")
    s.add_argument("--service-max-replicas", type=int, default=64)
    s.add_argument("--service-per-replica-rate", type=float, default=0.0,
                   help="requests/s one replica serves at full load (0: the rate's p95 / 8)")
    r = p.add_argument_group("request routing (--requests)")
    r.add_argument("--requests", nargs="?", const=str(AZURE), default=None, metavar="CSV",
                   help="replay inference requests instead (TIMESTAMP,ContextTokens,GeneratedTokens, as Azure ships "
                        f"its LLM traces; default {AZURE}): ours against nearest, least-loaded and nearest-spill")
    r.add_argument("--request-sites", type=int, default=4, help="regions with replicas and users, drawn per seed")
    r.add_argument("--replicas-per-site", type=int, default=2)
    r.add_argument("--slots", type=int, default=16, help="requests a replica serves at once (continuous batching)")
    r.add_argument("--surge", type=float, default=1.0,
                   help="the request rate x this for --surge-s from --surge-at (reaching it within a minute)")
    r.add_argument("--surge-at", type=float, default=1800.0)
    r.add_argument("--surge-s", type=float, default=600.0)
    r.add_argument("--slo-ttft", type=float, default=1.0, help="the time-to-first-token objective, seconds")


def served(args) -> int:
    """--services (streams/cli/simulate_services.py) or --requests."""
    if args.services:
        from streams.cli.simulate_services import services

        return services(args)
    return requests(args)


def requests(args) -> int:
    from streams.analytics.rtt_series import SeriesError, load_dir
    from streams.replay.requests import (
        RequestWorld,
        Serving,
        compare,
        load_azure_llm,
        replay_requests,
    )
    from streams.replay.traces import TraceError, load_skyplane

    if args.request_sites < 2 or args.replicas_per_site < 1 or args.slots < 1 or args.seeds < 1:
        raise UsageError("--request-sites at least 2, --replicas-per-site, --slots and --seeds at least 1")
    if not args.surge >= 1 or args.surge_s <= 0 or args.surge_at < 0 or args.slo_ttft <= 0:
        raise UsageError("--surge at least 1, --surge-s and --slo-ttft positive, --surge-at at least 0")
    try:
        trace = load_azure_llm(args.requests)
        npath = args.network.partition(":")[2]
        paths = load_skyplane(*npath.split(",")) if args.network.startswith("skyplane:") else None
        if paths is None:
            raise UsageError("--requests needs --network skyplane:LATENCY,THROUGHPUT (regions to draw from)")
        series = None if args.rtt_dynamics == "none" else load_dir(args.rtt_dynamics)
        w = RequestWorld(sites=args.request_sites, replicas_per_site=args.replicas_per_site, slo_ttft_s=args.slo_ttft,
                         surge=args.surge, surge_at_s=args.surge_at, surge_s=args.surge_s, serving=Serving(slots=args.slots))
        res = replay_requests(trace, paths, series, w, tuple(range(args.seeds)))
    except (TraceError, SeriesError) as exc:
        raise UsageError(str(exc)) from None
    rows = compare(res, w)
    out = {"trace": args.requests, "seeds": args.seeds, "world": {k: v for k, v in vars(w).items() if k != "serving"},
           "serving": vars(w.serving), "policies": res["policies"], "ours_against": rows}
    if args.json:
        json.dump(out, sys.stdout, default=float)
        print()
        return 0
    print(f"{len(trace):,} requests of {args.requests}, {args.seeds} seeds; {w.sites} regions drawn per seed, "
          f"{w.replicas_per_site} replica(s) each of {w.serving.slots} slots; SLO: TTFT <= {w.slo_ttft_s:g} s"
          + (f"; a {w.surge:g}x surge at {w.surge_at_s:g} s for {w.surge_s:g} s" if w.surge > 1 else ""))
    print(f"  {'policy':<14}{'TTFT p50':>10}{'p99':>9}{'e2e p50':>9}{'p99':>9}{'SLO met':>9}{'in surge':>10}"
          f"{'route ms p99':>14}")
    for p, f in res["policies"].items():
        surge = "" if f["slo_attainment_surge"] is None else f"{f['slo_attainment_surge']:.1%}"
        ms = f"{f['route_ms_p99']:.2f}" if "route_ms_p99" in f else ""
        print(f"  {p:<14}{f['ttft_p50_s']:>10.3f}{f['ttft_p99_s']:>9.2f}{f['e2e_p50_s']:>9.2f}{f['e2e_p99_s']:>9.2f}"
              f"{f['slo_attainment']:>9.1%}{surge:>10}{ms:>14}")
    print("ours against each baseline, per seed, mean and 95 % t-interval over seeds (SLO misses in percentage points)")
    for r in rows:
        ci = "" if r["ci_low"] != r["ci_low"] else f"[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"
        print(f"  {r['against']:<14}{r['metric']:<20}{r['change']:>+9.3f} {ci}")
    return 0

