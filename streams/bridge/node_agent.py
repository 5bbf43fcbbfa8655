"""`cnsched node-agent`: one daemon per node, reporting the machine on ``compute.nodes`` every few
seconds — its accelerators from ``nvidia-smi`` where it exists (else the configured cards), host
memory from ``/proc/meminfo``, CPUs, its place (region, zone, rack, tier) from its configuration,
free cards from Slurm's view of the node when it runs under Slurm (``--slurm-node``), and now and then
a benchmark's measured throughput (``--benchmark-cmd``), which the metering prefers over peaks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from schemas.compute import ComputeReport
from streams.bridge.machine import (
    NVIDIA_SMI,
    benchmark_value,
    machine_report,
    parse_meminfo,
    parse_nvidia_smi,
)
from streams.bridge.reporting import report_every
from streams.bridge.slurm_parse import gres_count, parse_line
from streams.config import Settings

log = logging.getLogger(__name__)


@dataclass
class NodeAgent:
    node: str
    config: dict = field(default_factory=dict)  # region, zone, rack, tier; cards, accel_model, accel_class
    nvidia_smi: list[str] = field(default_factory=lambda: list(NVIDIA_SMI))
    slurm_node: str | None = None
    slurm_gres: str = "gpu"
    benchmark_cmd: str | None = None
    benchmark_name: str = "benchmark"
    benchmark_unit: str = "samples/s"
    benchmark_every_s: float = 3600.0
    proc: Path = Path("/proc")
    env: dict | None = None
    clock: object = None  # when a benchmark ends (None: time.time)
    _benchmark: dict | None = None
    _benchmark_at: float = -1e18
    _thread: threading.Thread | None = None
    _proc: subprocess.Popen | None = None
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _warned: set = field(default_factory=set)

    def _run(self, argv: list[str], timeout_s: float = 30.0) -> str | None:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._warn(argv[0], f"{argv[0]}: {exc}")
            return None
        if out.returncode != 0:
            self._warn(argv[0], f"{argv[0]}: {(out.stderr or out.stdout).strip()[:200]}")
            return None
        return out.stdout

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:  # once: a machine without a GPU says so once, not every 5 s
            self._warned.add(key)
            log.warning("%s", message)

    def gpus(self) -> list[dict]:
        if self.config.get("cards") is not None or shutil.which(self.nvidia_smi[0]) is None:
            return []  # configured cards, or no NVIDIA driver here
        return parse_nvidia_smi(self._run(self.nvidia_smi) or "")

    def free_cards(self, cards: int) -> int | None:
        """Free cards as Slurm sees the node (its GRES less those allocated), or None without Slurm."""
        if self.slurm_node is None:
            return None
        text = self._run(["scontrol", "show", "node", self.slurm_node, "-o", "-d"])
        fields = parse_line(text.splitlines()[0]) if text and text.strip() else {}
        if "NodeName" not in fields:
            return None
        total = gres_count(fields.get("Gres"), self.slurm_gres) or cards
        return max(total - gres_count(fields.get("GresUsed"), self.slurm_gres), 0)

    def benchmark(self, now: float, wait: bool = False) -> dict | None:
        """The latest measured throughput. Every ``benchmark_every_s`` the command runs again, in a
        thread beside the reports (a benchmark of minutes never delays one, nor makes the node look
        silent); ``wait``: until that run ends (``--once``)."""
        running = self._thread is not None and self._thread.is_alive()
        due = now - self._benchmark_at >= self.benchmark_every_s
        if self.benchmark_cmd and due and not running and not self._closed:
            self._benchmark_at = now
            self._thread = threading.Thread(target=self._measure, args=(self.benchmark_cmd,), daemon=True,
                                            name=f"benchmark {self.node}")
            self._thread.start()
        if wait and self._thread is not None:
            self._thread.join()
        return self._benchmark

    def _measure(self, cmd: str) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                proc = self._proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE,
                                                     stderr=subprocess.PIPE, text=True, env=self.env,
                                                     start_new_session=True)  # its own group: close() stops it all
            out, err = proc.communicate(timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _kill(self._proc)
            self._warn("benchmark", f"the benchmark did not run: {exc}")
            return
        if proc.returncode != 0:
            if proc.returncode > 0:  # killed by close(): no warning
                self._warn("benchmark", f"the benchmark failed: {(err or out).strip()[-200:]!r}")
            return
        value = benchmark_value(out or "")
        if value is not None:  # one assignment: a report reads the old figure or the new one
            self._benchmark = {"name": self.benchmark_name, "value": value, "unit": self.benchmark_unit,
                               "measured_at": time.time() if self.clock is None else self.clock()}
        else:
            self._warn("benchmark", f"the benchmark printed no throughput: {out.strip()[-200:]!r}")

    def close(self) -> None:
        """Stop a benchmark still running, and start none again (the agent stops)."""
        with self._lock:
            self._closed, proc = True, self._proc
        _kill(proc)

    def report(self, now: float | None = None, wait_benchmark: bool = False) -> dict:
        now = time.time() if now is None else now
        gpus = self.gpus()
        try:
            meminfo = parse_meminfo((self.proc / "meminfo").read_text())
        except OSError:
            meminfo = (None, None)
        cards = len(gpus) if gpus else int(self.config.get("cards") or 0)
        r = machine_report(self.node, now, gpus, meminfo, os.cpu_count() or 1, self.config, self.free_cards(cards),
                           self.benchmark(now, wait_benchmark))
        ComputeReport.model_validate(r)  # what the worker accepts: a bad configuration fails here, loudly
        return r


def _kill(proc: subprocess.Popen | None) -> None:
    """Kill a benchmark's whole process group (its shell and what it started), if it still runs."""
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def run_node_agent(settings: Settings, agent: NodeAgent, interval_s: float, stop: asyncio.Event,
                         once: bool = False) -> int:
    """Report every ``interval_s`` until ``stop`` (or once, after its benchmark if it has one); the
    reports sent."""
    try:
        return await report_every(settings, lambda: [agent.report(wait_benchmark=once)], interval_s, stop, once)
    finally:
        agent.close()
