"""`cnsched simulate --ablations` and `--sweep`: the replay with one ingredient taken away at a
time, or one assumed parameter moved at a time (streams/replay/ablations.py), as a table or JSON."""

from __future__ import annotations

import json
import sys


def run_ablations(args, trace, paths, cfg, rtt_series) -> int:
    """``--ablations`` or ``--sweep``: a table (or JSON) of ours against each baseline per variant."""
    from streams.replay.ablations import ABLATIONS, ablate, sweep

    quiet = args.json or args.quiet
    seeds = tuple(range(args.seeds))

    def progress(name: str) -> None:
        if not quiet:
            print(f"  {name}: done", file=sys.stderr)

    if args.sweep:
        rows, what = sweep(trace, paths, cfg, seeds, rtt_series, args.workers, progress), "sweep"
    else:
        names = ABLATIONS if args.ablations == "all" else tuple(x.strip() for x in args.ablations.split(","))
        bad = [x for x in names if x not in ABLATIONS]
        if bad:
            from streams.cli.common import UsageError

            raise UsageError(f"--ablations: unknown {bad[0]!r}; known: all, {', '.join(ABLATIONS)}")
        rows, what = ablate(trace, paths, cfg, seeds, rtt_series, args.workers, names, progress), "ablations"
    if args.json:
        print(json.dumps({"trace": trace.source, "jobs": len(trace), "seeds": args.seeds, what: rows},
                         indent=2, default=str))
        return 0
    print(f"{what} of {len(trace)} {trace.source} jobs, {args.seeds} seeds: mean completion time (jct) of ours "
          "against each baseline, and data jobs' load time beyond the ideal (load) (change of the mean per seed, "
          "95 % t-interval over seeds; completed jobs)")
    print(f"  {'variant':<16}{'against':<14}{'kind':<8}{'metric':<7}{'jobs':>6}{'change':>9}  {'95 % interval':<20}"
          f"{'mean s':>11}{'vs':>11}{'top10':>7}")
    if not rows:
        print("  (no job the trace says completed ran under every policy: nothing to compare)")
    for r in rows:
        ci = "" if r["ci_low"] != r["ci_low"] else f"[{r['ci_low']:+.1%}, {r['ci_high']:+.1%}]"
        share = "n/a" if r["top10_share"] != r["top10_share"] else f"{r['top10_share']:.0%}"
        change = "n/a" if r["change"] != r["change"] else f"{r['change']:+.1%}"
        print(f"  {r['ablation']:<16}{r['against']:<14}{r['kind']:<8}{r['metric']:<7}{r['jobs']:>6}{change:>9}  {ci:<20}"
              f"{r['mean_policy_s']:>11,.0f}{r['mean_against_s']:>11,.0f}{share:>7}")
    return 0
