"""The `cnsched` command: parser and dispatch (main), one module per command group."""

from streams.cli.main import main

__all__ = ["main"]
