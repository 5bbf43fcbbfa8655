"""`cnsched slurm`: the Slurm bridge (streams/bridge/slurm.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys

from streams.cli.common import UsageError, require_bootstrap
from streams.config import Settings


def add_parsers(sub) -> None:
    s = sub.add_parser("slurm", help="bridge a Slurm cluster: its nodes on compute.nodes, decisions as jobs, "
                                     "job states as task events")
    s.add_argument("--gres", default="gpu", help="the GRES that counts as cards (default gpu)")
    s.add_argument("--sites", default=None, metavar="FILE.json",
                   help='per node: {"n1": {"region", "zone", "rack", "tier", "accel_model", "accel_class"}}')
    s.add_argument("--interval", type=float, default=5.0, help="seconds between inventory reports (default 5)")
    s.add_argument("--once", action="store_true", help="report the inventory once and exit")
    s.add_argument("--inventory-only", action="store_true", help="report the nodes only: run no jobs")
    s.add_argument("--drain-as", choices=["down", "leaving"], default="down",
                   help="a drained Slurm node: down (an incident, its work moved at once; default) or leaving "
                        "(cnsched's drain: its work moves at its next checkpoint)")
    s.add_argument("--work-dir", default=None, help="job output, checkpoint files and the bridge's state "
                                                    "(default CNSCHED_DATA_DIR/slurm; shared with the nodes)")


def cmd_slurm(args, settings: Settings) -> int:
    from streams.bridge.slurm import SlurmError, run_bridge, run_inventory, scontrol_nodes

    if args.interval <= 0:
        raise UsageError("slurm: --interval must be positive")
    sites: dict = {}
    if args.sites:
        try:
            with open(args.sites) as f:
                sites = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"slurm: --sites {args.sites}: {exc}") from None
        if not isinstance(sites, dict) or not all(isinstance(v, dict) for v in sites.values()):
            raise UsageError(f"slurm: --sites {args.sites}: an object of node -> {{region, zone, rack, ...}}")
    try:
        scontrol_nodes()  # Slurm answers, before anything is sent
    except SlurmError as exc:
        print(f"cnsched: slurm: {exc}", file=sys.stderr)
        return 1
    require_bootstrap(settings)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.once or args.inventory_only:
            return await run_inventory(settings, args.gres, sites, args.interval, stop, once=args.once,
                                       drain_as=args.drain_as)
        await run_bridge(settings, args.gres, sites, args.interval, stop, work_dir, drain_as=args.drain_as)
        return 0

    work_dir = args.work_dir or str(settings.data_dir / "slurm")
    sent = asyncio.run(main())
    if args.once:
        print(f"cnsched: slurm: {sent} node reports sent", file=sys.stderr)
    return 0


COMMANDS = {"slurm": cmd_slurm}
