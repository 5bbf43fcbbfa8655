"""`cnsched slurm`: the bridge between cnsched and a Slurm cluster. This part reports the inventory:
every few seconds, ``scontrol show node -o -d`` becomes one ``compute.nodes`` report per node (its
cards and free cards from the GRES Slurm counts, its host memory, its status from its state; see
``slurm_parse``), so the scheduler's books and Slurm's allocations are read from the same place.

Placements to ``sbatch`` and job states back as task events are the next part (issue 29)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time

from schemas.compute import ComputeReport
from schemas.topics import COMPUTE_NODES
from streams.bridge.slurm_parse import node_reports
from streams.config import Settings
from streams.kafka import producer

log = logging.getLogger(__name__)


class SlurmError(RuntimeError):
    """A Slurm command failed; the message says which and why."""


def scontrol_nodes(env: dict | None = None, timeout_s: float = 30.0) -> str:
    """``scontrol show node -o -d`` (one node a line, with the GRES in use)."""
    try:
        out = subprocess.run(["scontrol", "show", "node", "-o", "-d"], capture_output=True, text=True, env=env,
                             timeout=timeout_s)
    except FileNotFoundError:
        raise SlurmError("scontrol not found: is the Slurm client installed (slurm-client)?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol did not answer within {timeout_s:g} s") from None
    if out.returncode != 0:
        raise SlurmError(f"scontrol show node: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def inventory(gres: str, sites: dict[str, dict], env: dict | None = None, now: float | None = None) -> list[dict]:
    """The nodes as compute reports, each checked against the contract (a node whose report would be
    refused is logged and left out)."""
    now = time.time() if now is None else now
    out = []
    for r in node_reports(scontrol_nodes(env), now, gres, sites):
        try:
            ComputeReport.model_validate(r)
        except ValueError as exc:
            log.warning("slurm node %s not reported: %s", r.get("node"), exc)
            continue
        out.append(r)
    return out


async def run_inventory(settings: Settings, gres: str, sites: dict[str, dict], interval_s: float,
                        stop: asyncio.Event, once: bool = False, env: dict | None = None) -> int:
    """Report the inventory every ``interval_s`` until ``stop`` (or once); the reports sent."""
    p = producer(settings)
    await p.start()
    sent = 0
    try:
        while True:
            try:
                reports = await asyncio.to_thread(inventory, gres, sites, env)
            except SlurmError as exc:
                log.warning("inventory not read: %s", exc)  # the controller may be restarting: try again
                reports = []
            for r in reports:
                await p.send(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
            await p.flush()
            sent += len(reports)
            if once:
                return sent
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
                return sent
            except TimeoutError:
                pass
    finally:
        await p.stop()
