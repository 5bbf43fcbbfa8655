"""Data staged before a Slurm job (issue 53's E2): a decision's ``staging`` copies run as a Slurm job of
their own on the placement's first node — the target's side — and the task's job depends on it
(``--dependency=afterok``): it starts once the copies are made and loads from the target store.

- Each copy is the bridge's staging command (CNSCHED_STAGING_COMMAND) with ``{name}``, ``{source}``,
  ``{target}``, ``{size_gb}`` and ``{stores}`` (CNSCHED_STAGING_ROOT: each store a directory under it)
  filled in, shell-quoted; the default copies ``{stores}/{source}/{name}`` into ``{stores}/{target}/``.
  Several copies run one after another in the one staging job.
- The task's job finds its data at ``$CNSCHED_DATA_PATH`` (``{stores}/{target}/{name}`` of the first copy).
- When the staging job ends: a ``staged`` event with ``duration_s`` (Slurm's run time of the copies),
  ``name`` and ``target`` of each; when it fails, the task's job (which would wait for ever) is
  cancelled and the task ``failed``, saying the staging failed.
- A job may write ``load_s`` (how long loading its data took) to its progress file: a ``loaded`` event
  carries it (stored with the task's events: the load time seen on the nodes).
- A copy is made once (:class:`Copies`): a placement carrying a copy that a staging job is making
  already waits for that job instead, one carrying a copy made already copies nothing, and a placement
  that reads a copy at a store (``data_at``) is pointed at it — after its job, while it runs.
- Ahead: a queued decision's staging (a gang waiting for a set at another site) runs at once as a job
  of its own on the first node of the set it waits for (``waits_for``; no cards: beside the work
  there); its end is reported as ``staged`` of that task, and its placement there waits for it.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streams.bridge.slurm_parse import FAILED_STATES, LIVE_STATES, jobs
from streams.config import Settings

log = logging.getLogger(__name__)

DEFAULT_STAGING_COMMAND = Settings.model_fields["staging_command"].default
STAGE_SUFFIX = ".stage"  # a staging job's name: the task's id and this
STAGE_COMMENT = "stage:"  # a staging job's comment: this and the decision's time (never adopted as a task)


def staging_script(template: str, stores, staging: list[dict]) -> str:
    """The staging job's shell command: each copy's command from ``template``, in order, stopping at
    the first that fails."""
    return " && ".join(
        "(" + template.format(**{k: shlex.quote(str(v)) for k, v in {
            "name": s["name"], "source": s["source"], "target": s["target"], "size_gb": s.get("size_gb", 0),
            "stores": stores}.items()}) + ")"
        for s in staging)


def data_path(stores, staging: list[dict]) -> str:
    """Where the task's job finds the first copy: ``{stores}/{target}/{name}``."""
    return f"{stores}/{staging[0]['target']}/{staging[0]['name']}"


def stage_events(task: str, job, s: dict | None, now: float) -> tuple[list[dict], bool]:
    """(events, whether the task's job is to be cancelled) once the staging job ``s`` (its
    ``scontrol`` record; None: not listed) has ended, reported once."""
    if s is None or job.stage_reported or s["state"] not in ({"COMPLETED", "CANCELLED"} | FAILED_STATES):
        return [], False
    job.stage_reported = True
    if s["state"] == "COMPLETED":
        return [{"task_id": task, "event": "staged", "at": now, "nodes": s["nodes"] or job.nodes[:1],
                 "duration_s": float(s["run_s"] or 0.0),
                 "staged": [{"name": x["name"], "target": x["target"]} for x in job.staging]}], False
    job.reported = "FAILED"
    return [{"task_id": task, "event": "failed", "at": now, "nodes": job.nodes,
             "reason": f"staging its data failed: {s['state']} {s['reason']} exit {s['exit_code']}"}], True


@dataclass
class Copies:
    """The staging jobs the bridge submitted, by the copy each makes (``{target}/{name}`` -> Slurm job
    id), and those run ahead for a queued task (task -> the job, its copies, its decision's time);
    kept in a file beside the bridge's state, so a restarted bridge still knows which copies are being
    made."""

    made_by: dict[str, str] = field(default_factory=dict)
    ahead: dict[str, dict] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Copies:
        return cls(**json.loads(path.read_text())) if path.exists() else cls()

    def making(self, staging: list[dict], job_id: str) -> None:
        for s in staging:
            self.made_by[f"{s['target']}/{s['name']}"] = job_id

    def state(self, run, target: str, name: str) -> tuple[str, str]:
        """(job id, its Slurm state) of the staging job making ``target/name`` (("", "") none known)."""
        job_id = self.made_by.get(f"{target}/{name}", "")
        if not job_id:
            return "", ""
        out = run("scontrol", "show", "job", "-o", job_id)
        got = jobs(out.stdout) if out.returncode == 0 else []
        return job_id, got[0]["state"] if got else ""

    def cover(self, run, staging: list[dict], data_at: dict | None, stores,
              task: str = "") -> tuple[list[dict], str, str | None]:
        """(the copies to make, the staging job to wait for instead ("": none), where the task's data
        is: ``$CNSCHED_DATA_PATH``, None when it is told nothing). A copy carried again that a live
        staging job makes already is waited for, one made already is not made again; ``data_at`` (a copy
        it reads) is waited for while its job runs. The job ``task`` waits for, if its own copy ahead,
        is reported with its job from then (stage_events), not as ahead."""
        want = list(staging) or ([{"target": data_at["store"], "name": data_at["name"]}] if data_at else [])
        if not want:
            return [], "", None
        states = [self.state(run, s["target"], s["name"]) for s in want]
        live = {j for j, st in states if st in LIVE_STATES}
        ready = all(st in LIVE_STATES or st == "COMPLETED" for _, st in states) and len(live) <= 1
        todo = [] if not staging or ready else list(staging)
        wait = live.pop() if ready and live else ""
        if wait and self.ahead.get(task, {}).get("job") == wait:
            del self.ahead[task]
        return todo, wait, data_path(stores, want)

    def run_ahead(self, run, d: dict, node: str, stores, template: str, work_dir: Path) -> None:
        """A queued decision's staging, run now on ``node`` (of the set the task waits for) unless
        this decision's ran already or a live job makes each copy."""
        task, comment = d["task_id"], f"{STAGE_COMMENT}ahead:{d['decided_at']}"
        if self.ahead.get(task, {}).get("comment") == comment:
            return  # redelivered
        todo, _, _ = self.cover(run, d["staging"], None, stores)
        if not todo:
            return
        out = run("sbatch", "--parsable", "-J", task + STAGE_SUFFIX, f"--comment={comment}", "-w", node, "-N", "1",
                  "-o", str(work_dir / f"{task}-stage-%j.out"), "--wrap", staging_script(template, stores, todo))
        if out.returncode != 0:
            log.warning("sbatch refused the copy ahead for %s on %s: %s", task, node, out.stderr.strip()[:500])
            return
        job_id = out.stdout.strip().split(";")[0]
        self.making(todo, job_id)
        self.ahead[task] = {"job": job_id, "comment": comment, "node": node, "staging": todo}
        log.info("task %s waits for %s: its data is copied ahead there by Slurm job %s", task, node, job_id)

    def poll(self, by_id: dict, now: float) -> list[dict]:
        """``staged`` of each copy run ahead once its job completed (a failed one is only logged: the
        task's placement carries the copy again, as no runner said it is made). ``by_id``: every job
        Slurm lists now; a copy whose job it no longer lists (ended more than MinJobAge ago) is
        forgotten — :meth:`state` could not tell it from a copy never made — so the record stays
        as small as Slurm's own."""
        for key in [k for k, job in self.made_by.items() if job not in by_id]:
            del self.made_by[key]
        events = []
        for task, a in list(self.ahead.items()):
            j = by_id.get(a["job"])
            if j is None or j["state"] not in ({"COMPLETED", "CANCELLED"} | FAILED_STATES):
                continue
            del self.ahead[task]
            if j["state"] == "COMPLETED":
                events.append({"task_id": task, "event": "staged", "at": now, "nodes": j["nodes"] or [a["node"]],
                               "duration_s": float(j["run_s"] or 0.0),
                               "staged": [{"name": x["name"], "target": x["target"]} for x in a["staging"]]})
            else:
                log.warning("the copy ahead for %s (Slurm job %s) ended %s", task, a["job"], j["state"])
        return events
