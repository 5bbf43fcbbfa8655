"""`cnsched node-agent`: one daemon per node, reporting the machine on ``compute.nodes`` every few
seconds — its accelerators from ``nvidia-smi`` where it exists (else the configured cards), host
memory from ``/proc/meminfo``, CPUs, its place (region, zone, rack, tier) from its configuration,
free cards from Slurm's view of the node when it runs under Slurm (``--slurm-node``), and now and then
a benchmark's measured throughput (``--benchmark-cmd``), which the metering prefers over peaks."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
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
    _benchmark: dict | None = None
    _benchmark_at: float = -1e18
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

    def benchmark(self, now: float) -> dict | None:
        """The latest measured throughput, run again every ``benchmark_every_s``."""
        if self.benchmark_cmd and now - self._benchmark_at >= self.benchmark_every_s:
            self._benchmark_at = now
            out = self._run(["/bin/sh", "-c", self.benchmark_cmd], timeout_s=3600)
            value = benchmark_value(out or "")
            if value is not None:
                self._benchmark = {"name": self.benchmark_name, "value": value, "unit": self.benchmark_unit,
                                   "measured_at": now}
            elif out is not None:
                self._warn("benchmark", f"the benchmark printed no throughput: {out.strip()[-200:]!r}")
        return self._benchmark

    def report(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        gpus = self.gpus()
        try:
            meminfo = parse_meminfo((self.proc / "meminfo").read_text())
        except OSError:
            meminfo = (None, None)
        cards = len(gpus) if gpus else int(self.config.get("cards") or 0)
        r = machine_report(self.node, now, gpus, meminfo, os.cpu_count() or 1, self.config, self.free_cards(cards),
                           self.benchmark(now))
        ComputeReport.model_validate(r)  # what the worker accepts: a bad configuration fails here, loudly
        return r


async def run_node_agent(settings: Settings, agent: NodeAgent, interval_s: float, stop: asyncio.Event,
                         once: bool = False) -> int:
    """Report every ``interval_s`` until ``stop`` (or once); the reports sent."""
    return await report_every(settings, lambda: [agent.report()], interval_s, stop, once)
