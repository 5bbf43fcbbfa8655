"""The HTTP contract judged from outside: schemathesis, driven from the worker's own /openapi.json,
against a live worker (a write token, a DuckDB file, two nodes reported), with every check it has.

`cnsched fuzz` runs it long and with its stateful phase; tests/integration/test_contract.py runs a
bounded pass in `make test`. Either fails on any failure schemathesis reports: a 5xx, an answer the
document does not describe, a schema-valid request refused, a schema-violating one accepted."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from schemas.topics import COMPUTE_NODES
from streams.config import Settings
from streams.dev.ready import until_listed
from streams.kafka import ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process

CONFIG = Path(__file__).with_name("schemathesis.toml")
TOKEN = "contract-" + "w" * 24
NODES = ("n1", "n2")


def contract_settings(settings: Settings) -> Settings:
    # decisions are awaited for at most a second: thousands of submissions must not each wait 10 s
    return settings.model_copy(update={"api_tokens": {TOKEN: "write"}, "decision_timeout_seconds": 1.0})


async def run_contract(settings: Settings, workdir: Path, max_examples: int, seed: int = 1,
                       stateful: bool = False, limit_s: float = 1800.0) -> dict:
    """Start a worker, report its nodes, run schemathesis; {passed, failures, cases, seconds, tail}."""
    from sinks.duckdb_store import DuckStore

    settings = contract_settings(settings)
    await ensure_topics(settings)
    DuckStore.open(settings.duckdb_path).close()  # forecasts and sizings read it: 409/404, not 503
    worker = start_worker(settings, workdir / "worker.log")
    try:
        await _report_nodes(settings)
        await until_listed(settings.web_port, len(NODES), worker)
        phases = "examples,coverage,fuzzing" + (",stateful" if stateful else "")
        cmd = [str(Path(sys.executable).with_name("st")), "--config-file", str(CONFIG), "run",
               f"http://127.0.0.1:{settings.web_port}/openapi.json", "--checks", "all", "--phases", phases,
               "-H", f"Authorization: Bearer {TOKEN}", "--seed", str(seed), "--max-examples", str(max_examples),
               "--generation-deterministic", "--max-failures", "50", "--no-color", "--request-timeout", "30"]
        started = time.monotonic()
        done = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=limit_s)
        seconds = time.monotonic() - started
        alive = worker.poll() is None
    finally:
        stop_process(worker)
    out = done.stdout
    (workdir / "schemathesis.txt").write_text(out + done.stderr)
    failures = re.search(r"(\d+) found (\d+) unique failures", out)
    cases = re.search(r"(\d+) generated", out)
    return {"passed": done.returncode == 0 and alive, "exit_code": done.returncode, "worker_alive": alive,
            "cases": int(cases.group(1)) if cases else 0, "failures": int(failures.group(2)) if failures else 0,
            "seconds": round(seconds, 1), "report": str(workdir / "schemathesis.txt"),
            "summary": out[out.rfind("SUMMARY"):][-1500:] if "SUMMARY" in out else (out + done.stderr)[-1500:]}


async def _report_nodes(settings: Settings) -> None:
    p = producer(settings)
    await p.start()
    try:
        for node in NODES:
            report = {"node": node, "ts": time.time(), "region": "r1", "accel_class": "a100", "cards": 8,
                      "free": {"cards": 8}, "mem_gb": 512}
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(report).encode(), key=node.encode())
    finally:
        await p.stop()


