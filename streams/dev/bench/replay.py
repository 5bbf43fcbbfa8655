"""`cnsched bench replay`: the replay's wall time, ours beside an older revision of this repository
(default 5f5b6d2, before the queue retry in arrays) on the same machine, virtualenv and data, in one
run — and whether both gave the same results (a speed step must not change them).

Each round runs ``cnsched simulate --seeds 1 --no-store`` of each revision in turn (ours first),
the older one from a git worktree (removed at the end) with this repository's ``../shared`` data beside
it. Per policy, the wall time its run reported; the medians over rounds and baseline ÷ ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
_RUN = re.compile(r"^\s*(\S+) seed (\d+): ([0-9.]+) s$")
_WALL = re.compile(r" \([0-9.]+ s\)$", re.MULTILINE)  # the header's wall time


def policy_walls(stderr: str) -> dict[str, float]:
    """Each policy's wall time from simulate's progress lines (``  ours seed 0: 350.2 s``)."""
    return {m.group(1): float(m.group(3)) for m in map(_RUN.match, stderr.splitlines()) if m}


def results_of(stdout: str, shared: Path) -> str:
    """simulate's printed tables as the results they hold: the run's wall time and the data's root
    (``shared``, another for a worktree) left out."""
    return _WALL.sub("", stdout, count=1).replace(str(shared), "<shared>")


def _simulate(code: Path, limit: int, workers: int, policies: list[str]) -> tuple[str, dict, float]:
    cmd = [sys.executable, "-c", "from streams.cli.main import main; raise SystemExit(main())", "simulate",
           "--seeds", "1", "--workers", str(workers), "--no-store", "--limit", str(limit),
           "--policies", ",".join(policies)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=code, env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"simulate in {code} failed: {done.stderr.strip().splitlines()[-1:]}")
    return results_of(done.stdout, code.parent / "shared"), policy_walls(done.stderr), wall


def bench_replay(baseline_rev: str, limit: int, workers: int, rounds: int, policies: list[str]) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="cnsched-bench-replay-"))
    old = workdir / "baseline"
    (workdir / "shared").symlink_to((REPO.parent / "shared").resolve())  # the data, where ../shared is looked for
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), baseline_rev], check=True,
                   capture_output=True)
    try:
        runs: dict[str, list] = {"ours": [], baseline_rev: []}
        for _ in range(rounds):
            for label, code in (("ours", REPO), (baseline_rev, old)):
                runs[label].append(_simulate(code, limit, workers, policies))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)
    out: dict = {"jobs_limit": limit, "workers": workers, "rounds": rounds,
                 "results_identical": all(r[0] == runs["ours"][0][0] for rs in runs.values() for r in rs)}
    for label, rs in runs.items():
        out[f"{label}_wall_s"] = float(np.median([r[2] for r in rs]))
        for p in policies:
            out[f"{label}_{p}_s"] = float(np.median([r[1].get(p, np.nan) for r in rs]))
    out["wall_ratio_baseline_over_ours"] = out[f"{baseline_rev}_wall_s"] / max(out["ours_wall_s"], 1e-9)
    for p in policies:
        out[f"{p}_ratio_baseline_over_ours"] = out[f"{baseline_rev}_{p}_s"] / max(out[f"ours_{p}_s"], 1e-9)
    return out
