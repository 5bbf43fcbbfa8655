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

EXPERIMENTS: dict[str, list[tuple[str, dict]]] = {
    "e1": [("spanning world", SPANNING), ("fitting world", FITTING)],
    "e2": [("data 15 GB", {**E2_WORLD, "data_gb": 15.0, "ablations": "as-is"}),
           ("data 100 GB", {**E2_WORLD, "data_gb": 100.0, "ablations": "as-is"}),
           ("data 500 GB", {**E2_WORLD, "data_gb": 500.0, "ablations": "as-is,no-staging,no-reuse"})],
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
    if args.json:
        json.dump({"experiment": args.experiment, "worlds": results}, sys.stdout, indent=2, default=str)
        print()
    return 0
