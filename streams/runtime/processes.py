"""Child processes (the broker, workers, the sink): bound to their parent (they die with it, even on
SIGKILL), started with exactly our settings, stopped in order."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pydantic import SecretStr

from streams.config import Settings, env_name

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGKILL this child when its parent dies (no orphans)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def stop_process(proc: subprocess.Popen, timeout_s: float = 20.0) -> int:
    """SIGTERM, wait, then SIGKILL; return the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process load exactly these settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_") and k != "KAFKA_BOOTSTRAP"}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, (dict, list)):  # models inside (named API tokens) as their JSON
            value = json.dumps(value, default=lambda m: m.model_dump(mode="json"))
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
