"""`cnsched demo`: the whole pipeline on the embedded broker (or on KAFKA_BOOTSTRAP)."""

from __future__ import annotations

import asyncio
import logging

from streams.cli.common import UsageError
from streams.config import Settings
from streams.runtime.broker import EmbeddedBroker

log = logging.getLogger("cnsched")


def add_parsers(sub) -> None:
    d = sub.add_parser("demo", help="broker + worker + simulated probes; print what flows")
    d.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    d.add_argument("--rate", type=float, default=100.0, help="probe rate per node pair, Hz")
    d.add_argument("--nodes-per-region", type=int, default=3)
    d.add_argument("--day-seconds", type=float, default=120.0, help="length of a simulated day (diurnal load)")


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


COMMANDS = {"demo": cmd_demo}
