"""Child processes (workers, the sink) that die with their parent and stop in order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pydantic import SecretStr

from streams.children import die_with_parent
from streams.config import Settings, env_name


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process load exactly these settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_") and k != "KAFKA_BOOTSTRAP"}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        env[env_name(name)] = str(value)
    return env


def start_worker(settings: Settings, logfile: Path, *extra_args: str) -> subprocess.Popen:
    return start_command(settings, logfile, "worker", *extra_args)


def start_command(settings: Settings, logfile: Path, *args: str) -> subprocess.Popen:
    """``cnsched <args>`` as a child that dies with us, its output appended to ``logfile``."""
    logfile.parent.mkdir(parents=True, exist_ok=True)
    out = open(logfile, "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "streams.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=settings_env(settings),
            preexec_fn=die_with_parent,
            start_new_session=True,
        )
    finally:
        out.close()
