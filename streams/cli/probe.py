"""`cnsched probe` (a real probe agent) and `cnsched stats` (the ingest path offline)."""

from __future__ import annotations

import asyncio
import sys

from streams.cli.common import UsageError, require_bootstrap, run_until_signal
from streams.config import Settings


def add_parsers(sub) -> None:
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
    require_bootstrap(settings)
    ifaces = args.iface or [i for i in _interfaces() if i != "lo"]

    async def main(stop) -> dict:
        if args.seconds:
            asyncio.get_running_loop().call_later(args.seconds, stop.set)
        stats = await run_agent(settings, args.node, (listen.host, listen.port), peers, args.rate,
                                args.timeout, ifaces, args.link_gbps, stop)
        return vars(stats)

    try:
        stats = run_until_signal(main)
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


COMMANDS = {"probe": cmd_probe, "stats": cmd_stats}
