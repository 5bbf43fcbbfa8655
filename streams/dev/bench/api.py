"""`cnsched bench api`: a burst of concurrent GETs against a worker that knows many nodes, ours beside an
older revision of this repository (default 6fdafa7, the code before the request limits and the exact
contract of issue 32) on the same broker, machine and virtualenv, in one run.

Each round starts a worker of each revision in turn (ours first), sends it ``nodes`` compute reports,
waits until it lists them all, then sends ``requests`` concurrent GETs per path and times each answer.
The older revision runs from a git worktree of it (``git worktree add``), removed at the end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from schemas.topics import COMPUTE_NODES
from streams.config import Settings
from streams.dev.ready import until_listed
from streams.kafka import ensure_topics, producer
from streams.runtime.broker import free_port
from streams.runtime.processes import die_with_parent, settings_env

REPO = Path(__file__).resolve().parents[3]
DEFAULT_PATHS = ("/compute/nodes?limit=1000", "/health")


async def _burst(port: int, path: str, n: int) -> dict:
    import aiohttp

    lat, ok = [], 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        async def one() -> None:
            nonlocal ok
            t = time.perf_counter()
            try:
                async with s.get(f"http://127.0.0.1:{port}{path}", timeout=aiohttp.ClientTimeout(total=300)) as r:
                    await r.read()
                    ok += r.status == 200
            except Exception:  # refused, reset or timed out: counted as not ok, its time still counts
                pass
            lat.append(time.perf_counter() - t)

        await asyncio.gather(*[one() for _ in range(n)])
    return {"ok": ok, "p50_s": float(np.percentile(lat, 50)), "p99_s": float(np.percentile(lat, 99))}


async def _one_worker(base: Settings, code: Path, workdir: Path, nodes: int, requests: int, paths) -> dict:
    run = uuid.uuid4().hex[:8]
    s = base.model_copy(update=dict(topic_prefix=f"b{run}.", app_id=f"bench-api-{run}", data_dir=workdir / run,
                                    duckdb_path=workdir / f"{run}.duckdb", web_port=free_port()))
    await ensure_topics(s)
    env = {**settings_env(s), "PYTHONPATH": str(code)}
    with open(workdir / f"worker-{run}.log", "ab") as log:
        w = subprocess.Popen([sys.executable, "-m", "streams.cli", "worker"], cwd=code, env=env, stdout=log,
                             stderr=subprocess.STDOUT, preexec_fn=die_with_parent, start_new_session=True)
    try:
        p = producer(s)
        await p.start()
        for i in range(nodes):
            rep = {"node": f"n{i:04d}", "ts": time.time(), "region": "r1", "rack": f"k{i // 16}",
                   "accel_class": "a100", "cards": 8, "free": {"cards": 8}, "mem_gb": 512}
            await p.send(s.topic(COMPUTE_NODES), json.dumps(rep).encode(), key=rep["node"].encode())
        await p.stop()
        await until_listed(s.web_port, nodes, w, 180.0, f"the worker from {code} (log: {log.name})")
        return {path: await _burst(s.web_port, path, requests) for path in paths}
    finally:
        w.terminate()
        w.wait(30)


async def bench_api(base: Settings, nodes: int, requests: int, rounds: int, baseline_rev: str,
                    paths=DEFAULT_PATHS) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="cnsched-bench-api-"))
    old = workdir / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), baseline_rev], check=True,
                   capture_output=True)
    try:
        runs: dict[str, list[dict]] = {"ours": [], baseline_rev: []}
        for _ in range(rounds):
            for label, code in (("ours", REPO), (baseline_rev, old)):
                runs[label].append(await _one_worker(base, code, workdir, nodes, requests, paths))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)
    out: dict = {"nodes": nodes, "concurrent_requests": requests, "rounds": rounds}
    for path in paths:
        row = {}
        for label, rs in runs.items():
            row[f"{label}_ok"] = min(r[path]["ok"] for r in rs)
            row[f"{label}_p50_s"] = float(np.median([r[path]["p50_s"] for r in rs]))
            row[f"{label}_p99_s"] = float(np.median([r[path]["p99_s"] for r in rs]))
        row["p50_ratio_baseline_over_ours"] = row[f"{baseline_rev}_p50_s"] / max(row["ours_p50_s"], 1e-9)
        out[path] = row
    return out
