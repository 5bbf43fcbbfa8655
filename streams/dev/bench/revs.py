"""An older revision of this repository beside ours, in one bench run: a git worktree of it, and a
driver script run in a process of its own with that tree (or ours) first on the path."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def worktree(rev: str, prefix: str = "cnsched-bench-") -> Iterator[Path]:
    """A detached worktree of ``rev``, removed afterwards."""
    old = Path(tempfile.mkdtemp(prefix=prefix)) / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), rev], check=True,
                   capture_output=True)
    try:
        yield old
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)


def run_driver(code: Path, driver: str, *args) -> dict:
    """``driver`` run with ``code`` as the repository; its last line of output, as JSON."""
    done = subprocess.run([sys.executable, "-c", driver, *map(str, args)], cwd=code,
                          env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    if done.returncode != 0:  # a negative code: killed by that signal (9: out of memory, most likely)
        raise RuntimeError(f"the bench driver in {code} failed (exit {done.returncode}): "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
