"""The Slurm bridge's runner: cnsched's decisions become Slurm jobs, and the jobs' states come back as
task events.

- A ``placed`` decision is one ``sbatch`` (one job per task or gang: ``-w`` the chosen nodes, ``-N``
  their number, one task per node, ``--gres=<gres>:<cards>``, job name = task id, ``--comment`` = the
  decision's time, ``--wrap`` the task's ``command`` (a task without one is cancelled at once, by a
  ``cancel`` event from ``slurm-bridge``: Slurm has nothing to run), ``--time`` its requested limit ``time_limit_s``
  in whole minutes, rounded up, where Slurm stops it (TIMEOUT, reported ``failed``); ``--begin`` its
  ``start_at`` (a site's power ramp: not to start before), seconds from now; the job's environment carries
  ``CNSCHED_CHECKPOINT_FILE`` and ``CNSCHED_PROGRESS_FILE``). sbatch refusing it is a ``refused`` event
  (the scheduler's fallback takes the next candidate).
- Progress: a job may write a JSON object to ``$CNSCHED_PROGRESS_FILE`` as it runs (rewritten whole:
  ``{"throughput": 1520.5, "unit": "samples/s", "steps": 1200, "total_steps": 50000, "save_s": 42.0}``,
  every key optional). The last throughput goes with ``finished`` (what the learned alphas rank);
  ``steps`` of ``total_steps`` go as a ``progress`` event at most every :data:`PROGRESS_EVERY_S` (a
  move reads what is left of the run from them); ``save_s`` (how long its last checkpoint took) with
  the next ``checkpoint``; after a move or a restart from a checkpoint, the
  first write ends the restore: a second ``started`` carries its ``duration_s`` (Slurm's start to that
  write). The move cost counts both.
- A ``cancelled`` or ``preempted`` decision cancels the task's job (``scancel``); a cancelled task's
  job ending is its ``stopped`` event.
- A move (``sched.reschedules``) cancels the job and submits it again on the new nodes (cancel and
  resubmit rather than requeue: a requeued job keeps its old node list until it is pending again, and a
  new job says plainly where it runs); the new job's start is the ``started`` the move waits for.
- Job states, polled: RUNNING -> ``started`` (its nodes), COMPLETED -> ``finished`` (its run time),
  FAILED / NODE_FAIL / TIMEOUT / OUT_OF_MEMORY / BOOT_FAIL / DEADLINE -> ``failed``; a checkpoint file
  that changed -> ``checkpoint`` (its time and size).
- Never twice: a decision whose job (name and comment) Slurm already has is not submitted again, and
  what was reported of each job is kept in a state file (``<work dir>/slurm-bridge-<cluster>.json``),
  written before offsets are committed; a restarted bridge reads it and Slurm's jobs and goes on.
- One bridge per cluster: a runner submits only decisions whose nodes are all its cluster's (what
  ``sinfo`` lists, read again at most every :data:`NODES_TTL_S` when a decision names a node it does not
  know); another cluster's decision is that bridge's. A decision spread over clusters (Slurm runs a job
  in one; the scheduler keeps gangs inside one, so only a worker without the clusters' reports sends
  one) is ``refused`` by the bridge of its first node, naming all its nodes. A move to this cluster's
  nodes of a task another cluster ran is submitted from what the task's decision said (remembered for
  the last :data:`FOREIGN_KEPT` tasks decided elsewhere); the other bridge cancels its job.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streams.bridge.slurm_parse import FAILED_STATES, LIVE_STATES, gres_count, jobs, slurm_minutes
from streams.bridge.slurm_staging import (
    DEFAULT_STAGING_COMMAND,
    STAGE_COMMENT,
    STAGE_SUFFIX,
    Copies,
    stage_events,
    staging_script,
)

log = logging.getLogger(__name__)
NO_COMMAND = "the task has no command: the Slurm bridge runs a task's command (POST /tasks with \"command\")"
NODES_TTL_S = 5.0  # the cluster's node list is read again at most this often (a node added to Slurm)
FOREIGN_KEPT = 10_000  # tasks decided on other clusters whose command and cards are kept (a move here)
PROGRESS_EVERY_S = 60.0  # a job's steps done go to the scheduler at most this often


@dataclass
class Job:
    task_id: str
    job_id: str
    comment: str  # the decision (or move) it runs: its time
    nodes: list[str]
    reported: str = ""  # the last state reported as an event: "", RUNNING, or an end state
    stopping: str = ""  # why we cancelled it: "cancel" (say stopped), "move" or "preempt" (say nothing)
    checkpoint_mtime: float = 0.0
    cards: int = 0  # per node, what a move submits again
    command: str | None = None
    time_limit_s: float | None = None  # the task's requested limit, what a move submits again
    resumed: bool = False  # a move, or a restart with a checkpoint: its first progress ends the restore
    started_at: float = 0.0  # when Slurm started it (epoch seconds)
    progress_mtime: float = 0.0  # the progress file as last read
    restore_reported: bool = False
    throughput: float | None = None  # the last the job wrote in its progress file, in ``unit``
    unit: str = "samples/s"
    save_s: float | None = None  # how long its last checkpoint took to save, as the job wrote it
    steps: int | None = None  # steps done and in the whole run, as the job wrote them
    total_steps: int | None = None
    steps_sent: tuple = (None, -math.inf)  # (steps, when) of the last progress event
    stage_job: str = ""  # the Slurm job copying its data first (slurm_staging.py), if any
    stage_reported: bool = False
    staging: list = field(default_factory=list)  # the decision's copies
    load_s: float | None = None  # how long loading its data took, as the job wrote it
    load_sent: bool = False


@dataclass
class SlurmRunner:
    gres: str
    work_dir: Path  # job output and checkpoint files
    env: dict | None = None
    jobs: dict[str, Job] = field(default_factory=dict)  # task id -> its current job
    cluster: str = ""  # its Slurm cluster's name ("": the only one)
    own: frozenset[str] = frozenset()  # the cluster's nodes (sinfo)
    nodes_read_at: float = -math.inf
    foreign: dict[str, Job] = field(default_factory=dict)  # decided on another cluster: what a move here submits
    staging_command: str = DEFAULT_STAGING_COMMAND  # one copy of a decision's staging (slurm_staging.py)
    stores: Path | None = None  # the stores' root: each store a directory (None: <work dir>/stores)
    copies: Copies = field(default_factory=Copies)  # which staging job makes which copy (slurm_staging.py)

    @property
    def state_file(self) -> Path:
        return self.work_dir / (f"slurm-bridge-{self.cluster}.json" if self.cluster else "slurm-bridge.json")

    def _read_nodes(self, now: float) -> None:
        out = self._run("sinfo", "-h", "-N", "-o", "%N")
        if out.returncode == 0:
            self.own = frozenset(line.strip() for line in out.stdout.splitlines() if line.strip())
            self.nodes_read_at = now
        else:
            log.warning("sinfo: %s", out.stderr.strip())

    def mine(self, nodes: list[str], now: float) -> list[str]:
        """The ones of ``nodes`` this cluster has (its node list read again when one is unknown and the
        last read is older than :data:`NODES_TTL_S`)."""
        if any(n not in self.own for n in nodes) and now - self.nodes_read_at >= NODES_TTL_S:
            self._read_nodes(now)
        return [n for n in nodes if n in self.own]

    def _elsewhere(self, d: dict) -> None:
        """A decision placed on another cluster: kept, so a move of the task here can submit it."""
        self.foreign.pop(d["task_id"], None)
        self.foreign[d["task_id"]] = Job(d["task_id"], "", "", list(d["nodes"]), cards=int(d.get("cards") or 0),
                                         command=d.get("command"), time_limit_s=d.get("time_limit_s"))
        while len(self.foreign) > FOREIGN_KEPT:
            self.foreign.pop(next(iter(self.foreign)))

    def load(self) -> None:
        """What a previous run reported (a restart goes on from there), and the jobs Slurm has that it
        did not get to write down (killed between sbatch and saving): adopted by name and comment, so a
        redelivered decision finds its job and is not submitted twice."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._read_nodes(time.time())
        if self.state_file.exists():
            self.jobs = {t: Job(**j) for t, j in json.loads(self.state_file.read_text()).items()}
        self.copies = Copies.load(self.state_file.with_suffix(".copies.json"))
        out = self._run("scontrol", "show", "job", "-o")
        if out.returncode != 0:
            return
        for j in sorted(jobs(out.stdout), key=lambda j: int(j["job_id"]) if j["job_id"].isdigit() else 0):
            known = self.jobs.get(j["name"])
            if j["comment"].startswith(STAGE_COMMENT):
                continue  # a staging job: its task's job names it
            if j["comment"] and (known is None or (known.comment != j["comment"] and int(j["job_id"]) > int(
                    known.job_id if known.job_id.isdigit() else 0))):
                cards = gres_count(j["tres_per_node"].removeprefix("gres:"), self.gres)
                self.jobs[j["name"]] = Job(j["name"], j["job_id"], j["comment"], j["nodes"], cards=cards)
                log.info("adopted Slurm job %s of task %s (%s)", j["job_id"], j["name"], j["comment"])

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({t: asdict(j) for t, j in self.jobs.items()}))
        os.replace(tmp, self.state_file)
        self.copies.save(self.state_file.with_suffix(".copies.json"))

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=30)

    def checkpoint_file(self, task_id: str) -> Path:
        return self.work_dir / "checkpoints" / f"{task_id}.ckpt"

    def progress_file(self, task_id: str) -> Path:
        return self.work_dir / "progress" / f"{task_id}.json"

    def _progress(self, task: str, job: Job) -> float | None:
        """Read the job's progress file when it changed (its throughput, unit, save time kept on ``job``);
        the time it was written, or None (unchanged, absent, or half-written: read at the next poll)."""
        path = self.progress_file(task)
        try:
            mtime = path.stat().st_mtime
            if mtime <= job.progress_mtime:
                return None
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict):
            return None
        job.progress_mtime = mtime
        rate, save = doc.get("throughput"), doc.get("save_s")
        if isinstance(rate, int | float) and math.isfinite(rate) and rate >= 0:
            job.throughput = float(rate)
            job.unit = str(doc.get("unit") or "samples/s")[:64]
        if isinstance(save, int | float) and math.isfinite(save) and save >= 0:
            job.save_s = float(save)
        load = doc.get("load_s")
        if isinstance(load, int | float) and math.isfinite(load) and 0 <= load < 1e9 and job.load_s is None:
            job.load_s = float(load)
        steps, total = doc.get("steps"), doc.get("total_steps")
        if isinstance(steps, int) and isinstance(total, int) and 0 <= steps <= total and total > 0:
            job.steps, job.total_steps = steps, total
        return mtime

    # ------------------------------------------------------------------ decisions
    def on_decision(self, d: dict, now: float) -> list[dict]:
        """The events a decision causes at once (``refused`` when sbatch turns it away)."""
        task, status = d["task_id"], d.get("status")
        if status == "placed" and d.get("nodes"):
            nodes = list(d["nodes"])
            if (why := self._not_here(task, nodes, now, d)) is not None:
                return why
            return self._submit(task, nodes, int(d.get("cards") or 0), d.get("command"), str(d["decided_at"]),
                                now, d.get("time_limit_s"), d.get("start_at"), d.get("staging") or [], d.get("data_at"))
        if status in ("cancelled", "preempted"):
            self._cancel(task, "cancel" if status == "cancelled" else "preempt")
        elif d.get("staging") and d.get("waits_for") and self.mine(d["waits_for"][:1], now):  # copied ahead
            self.copies.run_ahead(self._run, d, d["waits_for"][0], self.stores or self.work_dir / "stores",
                                  self.staging_command, self.work_dir)
        return []

    def _not_here(self, task: str, nodes: list[str], now: float, spec: dict | None = None) -> list[dict] | None:
        """None when every node is this cluster's (the job is ours to submit); else the events: none
        for another cluster's placement (kept from ``spec``, the decision, for a move here later), a
        ``refused`` from the bridge of the first node for one spread over clusters."""
        mine = self.mine(nodes, now)
        if len(mine) == len(nodes):
            return None
        if not mine:
            if spec is not None:
                self._elsewhere(spec)
            return []
        if nodes[0] not in mine:
            return []  # the first node's bridge answers
        return [{"task_id": task, "event": "refused", "at": now, "nodes": nodes, "reason":
                 f"spans Slurm clusters: {', '.join(n for n in nodes if n not in mine)} not in {self.cluster or 'this one'}"
                 " (a Slurm job runs in one cluster)"}]

    def on_move(self, ev: dict, now: float) -> list[dict]:
        """A reschedule: the job is cancelled and submitted again on the new nodes — each by its own
        cluster's bridge (a move between clusters: one cancels, the other submits)."""
        task = ev["task_id"]
        old = self.jobs.get(task)
        if old is not None and old.comment == f"move:{ev['at']}":
            return []  # redelivered: this move's job runs already (cancelling would stop the moved task)
        if old is not None:
            self._cancel(task, "move")
        spec = old or self.foreign.get(task)
        nodes = list(ev["to_nodes"])
        if (why := self._not_here(task, nodes, now)) is not None:
            if old is not None and not why:  # moved to another cluster: its bridge runs it from now
                self._elsewhere({"task_id": task, "nodes": nodes, "cards": old.cards, "command": old.command,
                                 "time_limit_s": old.time_limit_s})
            return why
        if spec is None:
            return []  # not ours (placed before this bridge ran): nothing to move
        return self._submit(task, nodes, spec.cards, spec.command, f"move:{ev['at']}", now, spec.time_limit_s)

    def _submit(self, task: str, nodes: list[str], cards: int, command: str | None, comment: str,
                now: float, time_limit_s: float | None = None, start_at: float | None = None,
                staging: list[dict] = (), data_at: dict | None = None) -> list[dict]:
        known = self.jobs.get(task)
        if known is not None and known.comment == comment:
            known.command = known.command or command  # an adopted job learns its command again
            return []  # redelivered: submitted already
        if not (command or "").strip():  # nothing to run: never a placeholder job holding the cards
            log.warning("task %s has no command: cancelled, not submitted", task)
            return [{"task_id": task, "event": "cancel", "at": now, "by": "slurm-bridge",
                     "reason": NO_COMMAND}]
        ckpt, progress = self.checkpoint_file(task), self.progress_file(task)
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        progress.parent.mkdir(parents=True, exist_ok=True)
        progress.unlink(missing_ok=True)  # a previous run's: this run's first write ends its restore
        argv = ["sbatch", "--parsable", "-J", task, f"--comment={comment}", "-w", ",".join(nodes), "-N",
                str(len(nodes)), "--ntasks-per-node=1", "-o", str(self.work_dir / f"{task}-%j.out"),
                f"--export=ALL,CNSCHED_CHECKPOINT_FILE={ckpt},CNSCHED_PROGRESS_FILE={progress},CNSCHED_TASK_ID={task}"]
        if cards > 0:
            argv.append(f"--gres={self.gres}:{cards}")
        if time_limit_s:
            argv.append(f"--time={slurm_minutes(time_limit_s)}")
        if start_at and start_at > now:  # a site's power ramp: not before (relative: no time zone to agree on)
            argv.append(f"--begin=now+{math.ceil(start_at - now)}")
        stores = self.stores or self.work_dir / "stores"
        # copies still to make, or the staging job already making them (a copy made once), and where its data is
        todo, stage_id, path = self.copies.cover(self._run, list(staging), data_at, stores, task)
        if todo:  # its data copied first, on the target's side; the job waits for it
            out = self._run("sbatch", "--parsable", "-J", task + STAGE_SUFFIX, f"--comment={STAGE_COMMENT}{comment}",
                            "-w", nodes[0], "-N", "1", "-o", str(self.work_dir / f"{task}-stage-%j.out"),
                            "--wrap", staging_script(self.staging_command, stores, todo))
            if out.returncode != 0:
                return self._refused(task, nodes, out, now)
            stage_id = out.stdout.strip().split(";")[0]
            self.copies.making(todo, stage_id)
        if path:
            argv[next(i for i, a in enumerate(argv) if a.startswith("--export="))] += f",CNSCHED_DATA_PATH={path}"
        if stage_id:
            argv.append(f"--dependency=afterok:{stage_id}")
        argv += ["--wrap", command]
        out = self._run(*argv)
        if out.returncode != 0:
            if stage_id:
                self._run("scancel", stage_id)
            return self._refused(task, nodes, out, now)
        job_id = out.stdout.strip().split(";")[0]
        self.jobs[task] = Job(task, job_id, comment, list(nodes), cards=cards, command=command,
                              time_limit_s=time_limit_s, resumed=comment.startswith("move:") or ckpt.exists(),
                              stage_job=stage_id, staging=list(staging) or (
                                  [{"name": data_at["name"], "target": data_at["store"]}] if stage_id else []))
        log.info("task %s is Slurm job %s on %s%s", task, job_id, ",".join(nodes),
                 f" after staging job {stage_id}" if stage_id else "")
        return []

    def _refused(self, task: str, nodes: list[str], out: subprocess.CompletedProcess, now: float) -> list[dict]:
        why = (out.stderr.strip() or out.stdout.strip())[:500]
        log.warning("sbatch refused %s on %s: %s", task, ",".join(nodes), why)
        return [{"task_id": task, "event": "refused", "at": now, "nodes": nodes, "reason": why}]

    def _cancel(self, task: str, why: str) -> None:
        job = self.jobs.get(task)
        if job is None or job.reported in ("COMPLETED", "FAILED", "CANCELLED") or job.reported in FAILED_STATES:
            return
        job.stopping = why
        self._run("scancel", job.job_id)

    # ------------------------------------------------------------------ states
    def poll(self, now: float) -> list[dict]:
        """Events for what changed since the last poll."""
        if not self.jobs and not self.copies.ahead:
            return []
        out = self._run("scontrol", "show", "job", "-o")
        if out.returncode != 0:
            log.warning("scontrol show job: %s", out.stderr.strip())
            return []
        by_id = {j["job_id"]: j for j in jobs(out.stdout)}
        events = self.copies.poll(by_id, now)
        for task, job in self.jobs.items():
            if job.stage_job:
                got, cancel = stage_events(task, job, by_id.get(job.stage_job), now)
                events += got
                if cancel:
                    self._run("scancel", job.job_id)
            j = by_id.get(job.job_id)
            if j is None or job.reported == "FAILED" and job.stage_job and not j["started"]:
                continue
            events += self._events(task, job, j, now)
        return events

    def _events(self, task: str, job: Job, j: dict, now: float) -> list[dict]:
        state, events = j["state"], []
        if j["started"] and job.reported == "":
            job.reported = "RUNNING"
            job.started_at = now - float(j["run_s"] or 0.0)
            events.append({"task_id": task, "event": "started", "at": now, "nodes": j["nodes"] or job.nodes})
        wrote = self._progress(task, job) if job.reported == "RUNNING" else None
        if wrote is not None and job.resumed and not job.restore_reported:
            # its first progress after resuming: the restore took from its start to here (a move's cost)
            job.restore_reported = True
            events.append({"task_id": task, "event": "started", "at": now, "nodes": j["nodes"] or job.nodes,
                           "duration_s": round(max(wrote - job.started_at, 0.0), 3)})
        if job.load_s is not None and not job.load_sent:
            job.load_sent = True
            events.append({"task_id": task, "event": "loaded", "at": now, "nodes": job.nodes, "load_s": job.load_s})
        if job.steps is not None and job.steps != job.steps_sent[0] and now - job.steps_sent[1] >= PROGRESS_EVERY_S:
            job.steps_sent = (job.steps, now)  # at most one a minute: what a move reads its remaining work from
            events.append({"task_id": task, "event": "progress", "at": now, "nodes": job.nodes,
                           "steps_done": job.steps, "steps_total": job.total_steps})
        ckpt = self.checkpoint_file(task)
        if ckpt.exists() and job.reported == "RUNNING":
            st = ckpt.stat()
            if st.st_mtime > job.checkpoint_mtime:
                job.checkpoint_mtime = st.st_mtime
                events.append({"task_id": task, "event": "checkpoint", "at": now, "nodes": job.nodes,
                               "checkpoint_at": st.st_mtime, "checkpoint_gb": round(st.st_size / 1e9, 9),
                               "checkpoint_location": str(ckpt)} | (
                                   {"duration_s": job.save_s} if job.save_s is not None else {}))
        if state in LIVE_STATES or job.reported in ("COMPLETED", "FAILED", "CANCELLED"):
            return events
        end = {"task_id": task, "at": now, "nodes": job.nodes}
        if job.stopping:
            if job.stopping == "cancel":
                events.append(end | {"event": "stopped"})
            job.reported = "CANCELLED"
        elif state == "COMPLETED":
            events.append(end | {"event": "finished", "duration_s": float(j["run_s"] or 0.0)} | (
                {"throughput": job.throughput, "unit": job.unit} if job.throughput is not None else {}))
            job.reported = "COMPLETED"
        elif state in FAILED_STATES or state == "CANCELLED":
            events.append(end | {"event": "failed", "reason": f"{state} {j['reason']} exit {j['exit_code']}"})
            job.reported = "FAILED"
        return events


def wait_for(runner: SlurmRunner, until, timeout_s: float = 30.0, every_s: float = 0.5) -> list[dict]:
    """Poll until ``until(events so far)`` or the timeout; the events (tests and the CLI's --once)."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while not until(got) and time.monotonic() < deadline:
        got += runner.poll(time.time())
        time.sleep(every_s)
    return got
