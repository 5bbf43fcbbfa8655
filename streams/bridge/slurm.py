"""`cnsched slurm`: the bridge between cnsched and a Slurm cluster. This part reports the inventory:
every few seconds, ``scontrol show node -o -d`` becomes one ``compute.nodes`` report per node (its
cards and free cards from the GRES Slurm counts, its host memory, its status from its state; see
``slurm_parse``), so the scheduler's books and Slurm's allocations are read from the same place.

Placements become ``sbatch`` jobs and job states come back as task events (``slurm_jobs``); one bridge
runs per Slurm cluster (a site's), each submitting only the decisions for its own nodes."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time

from schemas.compute import ComputeReport
from streams.bridge.reporting import report_every
from streams.bridge.slurm_parse import node_reports
from streams.config import Settings
from streams.kafka import producer

log = logging.getLogger(__name__)


class SlurmError(RuntimeError):
    """A Slurm command failed; the message says which and why."""


def _scontrol(*argv: str, env: dict | None = None, timeout_s: float = 30.0) -> str:
    try:
        out = subprocess.run(["scontrol", *argv], capture_output=True, text=True, env=env, timeout=timeout_s)
    except FileNotFoundError:
        raise SlurmError("scontrol not found: is the Slurm client installed (slurm-client)?") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol did not answer within {timeout_s:g} s") from None
    if out.returncode != 0:
        raise SlurmError(f"scontrol {' '.join(argv[:2])}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def scontrol_nodes(env: dict | None = None, timeout_s: float = 30.0) -> str:
    """``scontrol show node -o -d`` (one node a line, with the GRES in use)."""
    return _scontrol("show", "node", "-o", "-d", env=env, timeout_s=timeout_s)


def cluster_name(env: dict | None = None) -> str:
    """The cluster's ``ClusterName`` (``scontrol show config``): what the bridge calls its cluster."""
    for line in _scontrol("show", "config", env=env).splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName" and value.strip():
            return value.strip()
    raise SlurmError("scontrol show config names no ClusterName: give the bridge --cluster")


def inventory(gres: str, sites: dict[str, dict], env: dict | None = None, now: float | None = None,
              drain_as: str = "down", cluster: str = "") -> list[dict]:
    """The nodes as compute reports, each checked against the contract (a node whose report would be
    refused is logged and left out); ``cluster``: named in each (``slurm_cluster``)."""
    now = time.time() if now is None else now
    out = []
    for r in node_reports(scontrol_nodes(env), now, gres, sites, drain_as, cluster):
        try:
            ComputeReport.model_validate(r)
        except ValueError as exc:
            log.warning("slurm node %s not reported: %s", r.get("node"), exc)
            continue
        out.append(r)
    return out


async def run_inventory(settings: Settings, gres: str, sites: dict[str, dict], interval_s: float,
                        stop: asyncio.Event, once: bool = False, env: dict | None = None, drain_as: str = "down",
                        cluster: str = "") -> int:
    """Report the inventory every ``interval_s`` until ``stop`` (or once); the reports sent."""
    def read() -> list[dict]:
        try:
            return inventory(gres, sites, env, None, drain_as, cluster)
        except SlurmError as exc:
            log.warning("inventory not read: %s", exc)  # the controller may be restarting: try again
            return []

    return await report_every(settings, read, interval_s, stop, once)


async def run_bridge(settings: Settings, gres: str, sites: dict[str, dict], interval_s: float, stop: asyncio.Event,
                     work_dir, env: dict | None = None, ready: asyncio.Event | None = None,
                     drain_as: str = "down", with_inventory: bool = True, cluster: str | None = None) -> None:
    """The whole bridge of one Slurm cluster (``cluster``; None: its ClusterName): the inventory every
    ``interval_s``; the decisions and moves for its own nodes to Slurm jobs; job states back as task
    events (polled every second). Each cluster's bridge reads every decision in its own consumer group
    (``<app id>-slurm-bridge-<cluster>``) and runs the ones on its nodes (slurm_jobs.SlurmRunner), so
    one cnsched drives a Slurm per site. Offsets are committed after the runner's state file is
    written, so a restart neither loses an event nor submits a task twice. A new bridge starts from
    the latest decisions (it does not run what was decided before it existed)."""
    from pathlib import Path

    from schemas.topics import SCHED_DECISIONS, SCHED_EVENTS, SCHED_RESCHEDULES
    from streams.bridge.slurm_jobs import SlurmRunner
    from streams.kafka import consumer

    cluster = cluster or await asyncio.to_thread(cluster_name, env)
    runner = SlurmRunner(gres, Path(work_dir), env, cluster=cluster, staging_command=settings.staging_command,
                         stores=Path(settings.staging_root) if settings.staging_root else None)
    runner.load()
    c = consumer(settings, SCHED_DECISIONS, SCHED_RESCHEDULES, group_id=f"{settings.app_id}-slurm-bridge-{cluster}",
                 enable_auto_commit=False, auto_offset_reset="latest")
    p = producer(settings)
    await c.start()
    await p.start()
    inventory_task = asyncio.create_task(run_inventory(settings, gres, sites, interval_s, stop, env=env,
                                                       drain_as=drain_as, cluster=cluster)) if with_inventory else None
    decisions, moves = settings.topic(SCHED_DECISIONS), settings.topic(SCHED_RESCHEDULES)

    async def send(events: list[dict]) -> None:
        for e in events:
            await p.send(settings.topic(SCHED_EVENTS), json.dumps(e).encode(), key=e["task_id"].encode())
        if events:
            await p.flush()

    try:
        while not c.assignment() and not stop.is_set():
            await asyncio.sleep(0.1)
        for tp in c.assignment():
            await c.position(tp)  # a new group's "latest", fixed now
        if ready is not None:
            ready.set()
        handlers = {decisions: runner.on_decision, moves: runner.on_move}
        while not stop.is_set():
            batches = await c.getmany(timeout_ms=500)
            events = await asyncio.to_thread(_apply, handlers, batches)
            events += await asyncio.to_thread(runner.poll, time.time())
            # events first, then what was reported, then the offsets: a crash in between repeats an event
            # (the scheduler takes a repeated one as it took the first), never loses one
            await send(events)
            await asyncio.to_thread(runner.save)
            if batches:
                await c.commit()
    finally:
        stop.set()
        if inventory_task is not None:
            await inventory_task
        await c.stop()
        await p.stop()


def _apply(handlers: dict, batches: dict) -> list[dict]:
    """Each decision and move of a fetch through its handler (sbatch, scancel: in a thread); the events."""
    events: list[dict] = []
    for tp, msgs in batches.items():
        for m in msgs:
            try:
                events += handlers[tp.topic](json.loads(m.value), time.time())
            except (ValueError, KeyError, TypeError) as exc:  # not ours to judge: the worker wrote it
                log.warning("message at %s:%d@%d not handled: %s", tp.topic, tp.partition, m.offset, exc)
    return events
