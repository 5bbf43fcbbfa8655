"""`cnsched slurm` (the Slurm bridge, streams/bridge/slurm.py) and `cnsched node-agent` (a machine's
report, streams/bridge/node_agent.py)."""

from __future__ import annotations

import json
import sys

from streams.cli.common import UsageError, require_bootstrap, run_until_signal
from streams.config import Settings


def add_parsers(sub) -> None:
    s = sub.add_parser("slurm", help="bridge a Slurm cluster: its nodes on compute.nodes, decisions as jobs, "
                                     "job states as task events")
    s.add_argument("--gres", default="gpu", help="the GRES that counts as cards (default gpu)")
    s.add_argument("--cluster", default=None,
                   help="this Slurm cluster's name, one bridge per cluster (default: its ClusterName)")
    s.add_argument("--sites", default=None, metavar="FILE.json",
                   help='per node: {"n1": {"region", "zone", "rack", "tier", "accel_model", "accel_class"}}')
    s.add_argument("--interval", type=float, default=5.0, help="seconds between inventory reports (default 5)")
    s.add_argument("--once", action="store_true", help="report the inventory once and exit")
    s.add_argument("--inventory-only", action="store_true", help="report the nodes only: run no jobs")
    s.add_argument("--no-inventory", action="store_true",
                   help="run jobs only: node agents (cnsched node-agent --slurm-node) report the nodes")
    s.add_argument("--drain-as", choices=["down", "leaving"], default="down",
                   help="a drained Slurm node: down (an incident, its work moved at once; default) or leaving "
                        "(cnsched's drain: its work moves at its next checkpoint)")
    _agent_parser(sub)
    r = sub.add_parser("route-agent", help="apply services' routing weights (sched.routes) to HAProxy through its "
                                           "runtime API: a server per replica, its weight per origin")
    r.add_argument("--socket", required=True, help="HAProxy's admin socket (global: stats socket PATH level admin)")
    r.add_argument("--backend", default="{service}.{origin}",
                   help="the backend of a service's origin, declared in HAProxy's configuration (default "
                        "{service}.{origin})")
    r.add_argument("--service", action="append", default=None, help="only this service (repeatable; default: all)")
    r.add_argument("--drain-seconds", type=float, default=30.0,
                   help="a replica the weights no longer name drains this long before its server is deleted")
    s.add_argument("--work-dir", default=None, help="job output, checkpoint files and the bridge's state "
                                                    "(default CNSCHED_DATA_DIR/slurm; shared with the nodes)")


def _agent_parser(sub) -> None:
    a = sub.add_parser("node-agent", help="report this machine on compute.nodes: accelerators (nvidia-smi), "
                                          "memory, free cards (Slurm), a benchmark")
    a.add_argument("--node", required=True, help="this node's id")
    for name in ("region", "zone", "rack", "accel-model", "accel-class"):
        a.add_argument(f"--{name}", default=None)
    a.add_argument("--address", default=None, help="host or IP its services are reached at (route agents' servers)")
    a.add_argument("--tier", choices=["centre", "province", "edge"], default=None)
    a.add_argument("--cards", type=int, default=None, help="cards, when nvidia-smi does not say (it then is not asked)")
    a.add_argument("--nvidia-smi", default="nvidia-smi", help="the nvidia-smi to run (default: on PATH)")
    a.add_argument("--slurm-node", default=None, help="this node's Slurm name: free cards as Slurm allocates them")
    a.add_argument("--slurm-gres", default="gpu", help="the GRES that counts as cards (default gpu)")
    a.add_argument("--benchmark-cmd", default=None, help="a command whose output ends with its throughput")
    a.add_argument("--benchmark-name", default="benchmark", help="the standard workload it runs, e.g. resnet50-train")
    a.add_argument("--benchmark-unit", default="samples/s")
    a.add_argument("--benchmark-every", type=float, default=3600.0, help="seconds between benchmark runs")
    a.add_argument("--interval", type=float, default=5.0, help="seconds between reports (default 5)")
    a.add_argument("--once", action="store_true", help="print one report and exit (nothing sent, unless --send)")
    a.add_argument("--send", action="store_true", help="with --once: send that report too (the node registers)")
    ev = sub.add_parser("event", help="send a runner's event on sched.events by hand (what the Slurm bridge or "
                                      "the demo's runner send): started, finished, failed, stopped, ...")
    ev.add_argument("task_id")
    ev.add_argument("event", choices=["started", "finished", "failed", "stopped", "refused", "checkpoint"])
    ev.add_argument("--nodes", default=None, help="where it runs, comma-separated (default: where it was placed)")
    ev.add_argument("--duration", default=None, help="finished: its run time, with a unit (90s, 2h)")
    ev.add_argument("--throughput", type=float, default=None, help="finished: achieved samples/s (learned alphas)")


def cmd_node_agent(args, settings: Settings) -> int:
    import re

    from pydantic import ValidationError

    from schemas.compute import NODE_ID_PATTERN
    from streams.bridge.machine import NVIDIA_SMI
    from streams.bridge.node_agent import NodeAgent, run_node_agent

    if not re.match(NODE_ID_PATTERN, args.node):
        raise UsageError(f"node-agent: --node {args.node!r} must match {NODE_ID_PATTERN}")
    if args.interval <= 0 or args.benchmark_every <= 0 or (args.cards is not None and not 0 <= args.cards <= 1024):
        raise UsageError("node-agent: --interval and --benchmark-every must be positive, --cards in 0..1024")
    config = {"region": args.region, "zone": args.zone, "rack": args.rack, "tier": args.tier, "cards": args.cards,
              "accel_model": args.accel_model, "accel_class": args.accel_class, "address": args.address}
    agent = NodeAgent(args.node, {k: v for k, v in config.items() if v is not None},
                      nvidia_smi=[args.nvidia_smi, *NVIDIA_SMI[1:]], slurm_node=args.slurm_node,
                      slurm_gres=args.slurm_gres, benchmark_cmd=args.benchmark_cmd, benchmark_name=args.benchmark_name,
                      benchmark_unit=args.benchmark_unit, benchmark_every_s=args.benchmark_every)
    try:
        first = agent.report(wait_benchmark=args.once)  # --once: with its benchmark
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "report"
        raise UsageError(f"node-agent: the report would be refused: {where}: {e['msg']}") from None
    if args.send and not args.once:
        raise UsageError("node-agent: --send goes with --once (without --once every report is sent)")
    if args.once and not args.send:  # a look at what would be reported: the node does not register
        print(json.dumps(first))
        return 0
    require_bootstrap(settings)

    run_until_signal(lambda stop: run_node_agent(settings, agent, args.interval, stop, once=args.once))
    if args.once:
        print(json.dumps(first))
    return 0


def cmd_event(args, settings: Settings) -> int:
    """One TaskEvent on sched.events, keyed by the task (what a runner sends); the event printed."""
    import asyncio
    import time

    from pydantic import ValidationError

    from schemas.sched import TaskEvent
    from schemas.topics import SCHED_EVENTS
    from schemas.units import parse_duration
    from streams.kafka import producer

    fields = {"task_id": args.task_id, "event": args.event, "at": time.time(),
              "nodes": [n for n in (args.nodes or "").split(",") if n], "throughput": args.throughput}
    try:
        if args.duration is not None:
            fields["duration_s"] = parse_duration(args.duration, unit_required=True)
        ev = TaskEvent.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValueError as exc:  # pydantic's ValidationError is one
        errors = exc.errors() if isinstance(exc, ValidationError) else None
        raise UsageError(f"event: {errors[0]['loc'][0]}: {errors[0]['msg']}" if errors else f"event: --duration {exc}") \
            from None
    require_bootstrap(settings)

    async def send() -> None:
        p = producer(settings)
        await p.start()
        try:
            await p.send_and_wait(settings.topic(SCHED_EVENTS), ev.model_dump_json(exclude_none=True).encode(),
                                  key=ev.task_id.encode())
        finally:
            await p.stop()

    asyncio.run(send())
    print(ev.model_dump_json(exclude_none=True))
    return 0


def cmd_slurm(args, settings: Settings) -> int:
    from streams.bridge.slurm import (
        SlurmError,
        cluster_name,
        run_bridge,
        run_inventory,
        scontrol_nodes,
    )

    if args.interval <= 0:
        raise UsageError("slurm: --interval must be positive")
    if args.no_inventory and (args.inventory_only or args.once):
        raise UsageError("slurm: --no-inventory runs jobs only; --inventory-only and --once report the inventory")
    sites: dict = {}
    if args.sites:
        try:
            with open(args.sites) as f:
                sites = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"slurm: --sites {args.sites}: {exc}") from None
        if not isinstance(sites, dict) or not all(isinstance(v, dict) for v in sites.values()):
            raise UsageError(f"slurm: --sites {args.sites}: an object of node -> {{region, zone, rack, ...}}")
    if args.cluster is not None and not args.cluster.strip():
        raise UsageError("slurm: --cluster must name the cluster")
    try:
        scontrol_nodes()  # Slurm answers, before anything is sent
        cluster = args.cluster or cluster_name()
    except SlurmError as exc:
        print(f"cnsched: slurm: {exc}", file=sys.stderr)
        return 1
    require_bootstrap(settings)

    async def main(stop) -> int:
        if args.once or args.inventory_only:
            return await run_inventory(settings, args.gres, sites, args.interval, stop, once=args.once,
                                       drain_as=args.drain_as, cluster=cluster)
        await run_bridge(settings, args.gres, sites, args.interval, stop, work_dir, drain_as=args.drain_as,
                         with_inventory=not args.no_inventory, cluster=cluster)
        return 0

    work_dir = args.work_dir or str(settings.data_dir / "slurm")
    sent = run_until_signal(main)
    if args.once:
        print(f"cnsched: slurm: {sent} node reports sent", file=sys.stderr)
    return 0


def cmd_route_agent(args, settings: Settings) -> int:
    from streams.bridge.haproxy import Applier, HaproxyError, RuntimeApi, run_route_agent

    try:
        args.backend.format(service="s", origin="o")
    except (KeyError, IndexError, ValueError):
        raise UsageError("route-agent: --backend may name {service} and {origin} only") from None
    if "{service}" not in args.backend or "{origin}" not in args.backend:
        raise UsageError("route-agent: --backend must name both {service} and {origin}")
    if not args.drain_seconds >= 0:
        raise UsageError("route-agent: --drain-seconds must be 0 or more")
    api = RuntimeApi(args.socket)
    try:
        api.info()  # HAProxy answers, before anything is consumed
    except HaproxyError as exc:
        print(f"cnsched: route-agent: {exc}", file=sys.stderr)
        return 1
    require_bootstrap(settings)
    applier = Applier(api, args.backend, args.drain_seconds)
    services = set(args.service) if args.service else None
    run_until_signal(lambda stop: run_route_agent(settings, applier, stop, services))
    return 0


COMMANDS = {"slurm": cmd_slurm, "node-agent": cmd_node_agent, "event": cmd_event, "route-agent": cmd_route_agent}
