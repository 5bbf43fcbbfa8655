"""What every `cnsched` command module shares: usage errors (one line, exit 2), the parser class that
raises them, the usage errors of drawing a chart, and the key/value printout of results."""

from __future__ import annotations

import argparse
import contextlib


class UsageError(Exception):
    """Wrong use of the command line: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, not a usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


@contextlib.contextmanager
def drawing(option: str, path: str, command: str = ""):
    """Around a chart's drawing: no matplotlib, or a path that cannot be written, is a usage error
    naming the option (``--plot``, ``--png``) and the file."""
    from streams.render.charts import PlotUnavailable

    lead = f"{command}: " if command else ""
    try:
        yield
    except PlotUnavailable as exc:
        raise UsageError(f"{lead}{option}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{lead}{option} {path}: {exc.strerror or exc}") from None


def print_result(result: dict, as_json: bool) -> None:
    import json

    if as_json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        if isinstance(v, dict):  # nested: dotted names
            print_result({f"{k}.{a}": b for a, b in v.items()}, False)
        elif isinstance(v, float):
            print(f"{k:36} {v:,.6f}" if v < 1 else f"{k:36} {v:,.2f}")
        else:
            print(f"{k:36} {v}")


def require_bootstrap(settings) -> None:
    """Commands that talk to Kafka need KAFKA_BOOTSTRAP (or start the embedded broker themselves)."""
    from streams.config import ConfigError

    if not settings.kafka_bootstrap:
        raise ConfigError(
            "invalid configuration: KAFKA_BOOTSTRAP is not set (run 'cnsched broker' and export "
            "the address it prints, or point it at your Kafka cluster)"
        )


def run_until_signal(main):
    """``asyncio.run(main(stop))`` with SIGINT and SIGTERM setting ``stop`` (a daemon's clean exit)."""
    import asyncio
    import signal

    async def wrapper():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await main(stop)

    return asyncio.run(wrapper())
