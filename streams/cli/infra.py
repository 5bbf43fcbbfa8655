"""`cnsched` infrastructure commands: broker, topics, worker, sink."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time

from schemas.topics import PROBE_SAMPLES
from streams.cli.common import UsageError, require_bootstrap
from streams.config import Settings
from streams.runtime.broker import EmbeddedBroker

log = logging.getLogger("cnsched")


def add_parsers(sub) -> None:
    b = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (Tansu, memory storage)")
    b.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    b.add_argument("--host", default="127.0.0.1")
    b.add_argument("--json", action="store_true", help="print the address as JSON")

    w = sub.add_parser("worker", help="run a Faust worker (needs KAFKA_BOOTSTRAP)")
    w.add_argument("--baseline", action="store_true",
                   help="run the benchmark baseline (one JSON sample per message) instead")

    t = sub.add_parser("topics", help="create the topics with the configured partition count")
    t.add_argument("--json", action="store_true")

    sub.add_parser("sink", help="run the DuckDB sink, the single writer of CNSCHED_DUCKDB_PATH")


def cmd_broker(args, settings: Settings) -> int:
    if args.port is not None and not (0 < args.port < 65536):
        raise UsageError(f"--port must be 1..65535, got {args.port}")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedBroker(port=args.port, host=args.host) as bootstrap:
        if args.json:
            import json

            print(json.dumps({"bootstrap": bootstrap}), flush=True)
        else:
            print(f"KAFKA_BOOTSTRAP={bootstrap}", flush=True)
        stop.wait()
    return 0


def cmd_topics(args, settings: Settings) -> int:
    import logging

    from streams.kafka import ensure_topics_sync

    require_bootstrap(settings)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # a broker it cannot reach: our one line says so
    created = ensure_topics_sync(settings)
    if args.json:
        import json

        print(json.dumps(created))
    else:
        for name, parts in created.items():
            print(f"{name}\t{parts}")
    return 0


def cmd_worker(args, settings: Settings) -> int:
    from faust import Worker

    from streams.app import create_app
    from streams.kafka import ensure_topics_sync, table_changelogs

    require_bootstrap(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if not args.baseline:
        from streams.worker.windowing import warm_up

        t = time.monotonic()
        warm_up()
        log.info("kernels ready in %.1f s", time.monotonic() - t)
    partitions = ensure_topics_sync(settings)
    sample_partitions = partitions[settings.topic(PROBE_SAMPLES)]
    ensure_topics_sync(settings, (), table_changelogs(settings, sample_partitions))
    if args.baseline:
        from streams.dev.bench.baseline import BASELINE_TOPIC, create_baseline_app

        ensure_topics_sync(settings, (BASELINE_TOPIC,))
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run above closed its loop
    if args.baseline:
        app, _ = create_baseline_app(settings)
    else:
        from streams.worker.broker_watch import restart_in_place

        app, _, _ = create_app(settings, sample_partitions, on_broker_lost=restart_in_place)
    worker = Worker(app, loglevel=settings.log_level, quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()  # runs until SIGINT/SIGTERM; exits the process
    return 0


def cmd_sink(args, settings: Settings) -> int:
    from streams.kafka import ensure_topics_sync
    from streams.runtime.sink_runner import run_sink

    require_bootstrap(settings)
    ensure_topics_sync(settings)
    return asyncio.run(run_sink(settings))


COMMANDS = {"broker": cmd_broker, "topics": cmd_topics, "worker": cmd_worker, "sink": cmd_sink}
