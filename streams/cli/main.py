"""The `cnsched` command: the parser and the dispatch. Each command group lives in its own module
(infra, probe, data, api, bench, demo) with its parsers and handlers."""

from __future__ import annotations

import argparse
import sys

from aiokafka.errors import KafkaError

from sinks.duckdb_store import StoreError
from streams.cli import api, bench, bridge, data, demo, infra, listing, operate, probe, simulate
from streams.cli.common import Parser, UsageError
from streams.config import ConfigError, load_settings
from streams.logs import setup_logging
from streams.runtime.broker import BrokerError

GROUPS = (infra, probe, bridge, data, api, listing, operate, bench, demo, simulate)
COMMANDS = {name: handler for group in GROUPS for name, handler in group.COMMANDS.items()}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="cnsched", description="Compute-network joint scheduler for AI workloads.")
    p.add_argument("--version", action="version", version=f"cnsched {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for group in GROUPS:
        group.add_parsers(sub)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cnsched")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    settings = None
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        settings = load_settings()
        setup_logging(settings.log_level)
        return COMMANDS[args.command](args, settings)
    except UsageError as exc:
        print(f"cnsched: error: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"cnsched: {exc}", file=sys.stderr)
        return 2
    except BrokerError as exc:
        print(f"cnsched: broker: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:  # e.g. no broker at KAFKA_BOOTSTRAP: one line, not a traceback
        where = ",".join(settings.bootstrap_servers) if settings is not None else "KAFKA_BOOTSTRAP"
        print(f"cnsched: broker: cannot use the broker at {where}: {exc}", file=sys.stderr)
        return 1
    except StoreError as exc:
        print(f"cnsched: duckdb: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cnsched ... | head`: the reader left; end quietly, as cat does
        _quiet_stdout()
        return 141


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that Python's flush at exit does not fail again on the closed pipe."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
