"""`cnsched simulate --experiment e1|e2`: issue 53's experiments as the README's tables — each one a
few replays of the same jobs in worlds named here, every option not named here as given (the trace,
--limit, --seeds, --workers, --models...), so one command reproduces a table.

- ``e1`` (spanning a real WAN): ours against topology and compute-only in the spanning world (21
  regions drawn per seed, racks of 2 nodes: gangs must span racks and some sites) and in the fitting
  world (8 regions, racks of 16 nodes: every gang fits in one), 15-minute windows.
- ``e2`` (data far from compute, and data that follows compute): 8 regions drawn per seed (Skyplane's
  median pair 4.3 Gbit/s), 2 racks of 8 nodes each, half the jobs read data from their user's home
  site; data of 15, 100 and 500 GB, ours against each baseline (completion per kind and data jobs'
  load time); at 500 GB also ours without staging and without reuse.
- ``e5`` (the network over time where it is used): 8 regions drawn per seed, 3 racks of 2 nodes each
  (gangs cross rack uplinks and sites), every site pair and every rack uplink driven by a real
  labelled RIPE Atlas series (streams/replay/dynamics.py), 4-minute windows (the series' step: the
  degradation detector sees each sample); ours, ours without moves (ours-static), topology and
  compute-only; the jobs a labelled change point reached while they ran (``changed``) apart from the rest
  (``steady``); beside them the detector's catch within an hour and false alarms per path-day on the
  same labelled series (`cnsched bench detect`'s figures).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys

SPANNING = {"regions": "random", "sites": 21, "racks_per_site": 3, "nodes_per_rack": 2, "epoch": 900.0}
FITTING = {"regions": "random", "sites": 8, "racks_per_site": 1, "nodes_per_rack": 16, "epoch": 900.0}
E2_WORLD = {"regions": "random", "sites": 8, "racks_per_site": 2, "nodes_per_rack": 8, "data_share": 0.5}

E5_WORLD = {"regions": "random", "sites": 8, "racks_per_site": 3, "nodes_per_rack": 2, "epoch": 240.0,
            "uplink_dynamics": True, "policies": "ours,ours-static,topology,compute-only"}

EXPERIMENTS: dict[str, list[tuple[str, dict]]] = {
    "e1": [("spanning world", SPANNING), ("fitting world", FITTING)],
    "e2": [("data 15 GB", {**E2_WORLD, "data_gb": 15.0, "ablations": "as-is"}),
           ("data 100 GB", {**E2_WORLD, "data_gb": 100.0, "ablations": "as-is"}),
           ("data 500 GB", {**E2_WORLD, "data_gb": 500.0, "ablations": "as-is,no-staging,no-reuse"})],
    "e5": [("uplinks and site pairs on real series", E5_WORLD)],
}


def run_experiment(args, settings) -> int:
    """Each world of ``args.experiment`` in turn (its options over the given ones): the text of each
    under a heading, or (``--json``) one document with every world's result."""
    from streams.cli.simulate import cmd_simulate

    worlds, results = EXPERIMENTS[args.experiment], []
    for label, overrides in worlds:
        one = argparse.Namespace(**{**vars(args), **overrides, "experiment": None})
        if not args.json:
            print(f"\n== {args.experiment}: {label} ({', '.join(f'{k}={v}' for k, v in overrides.items())})",
                  flush=True)
            rc = cmd_simulate(one, settings)
        else:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = cmd_simulate(one, settings)
            results.append({"world": label, "options": overrides, "result": json.loads(out.getvalue())})
        if rc:
            return rc
    detector = _detector(args) if args.experiment == "e5" else None
    if args.json:
        json.dump({"experiment": args.experiment, "worlds": results, **({"detector": detector} if detector else {})},
                  sys.stdout, indent=2, default=str)
        print()
    return 0


def _detector(args) -> dict | None:
    """The degradation detector's catch and false alarms on the series that drove the replay (the
    E5 table's last rows; None without series); printed unless ``--json``."""
    if args.rtt_dynamics == "none":
        return None
    from streams.analytics.rtt_series import load_dir
    from streams.dev.bench.detect import RULES, run_rule
    from streams.replay.dynamics import RISE

    series = load_dir(args.rtt_dynamics)
    step = series[0].step_s if series else 240.0
    total = run_rule(series, RULES["ours"], RISE)[0].summary(step)
    out = {"series": len(series), "path_days": round(sum(s.rtt.size for s in series) * step / 86400, 1),
           **{k: total[k] for k in ("events", "recall_1_hour", "recall_2_windows", "false_alarms_per_path_day",
                                    "strict_false_alarms_per_path_day", "delay_median_min")}}
    if not args.json:
        print(f"\n== e5: the detector on the same series ({out['series']} series, {out['path_days']} path-days, "
              f"{out['events']} labelled rises >= {RISE}x): caught within 1 h {out['recall_1_hour']:.1%}, "
              f"within two windows {out['recall_2_windows']:.1%}; false alarms per path-day "
              f"{out['false_alarms_per_path_day']:.3f} (strict: {out['strict_false_alarms_per_path_day']:.3f}); "
              f"median delay {out['delay_median_min']:.0f} min")
    return out
