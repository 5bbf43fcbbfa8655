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
"""

from __future__ import annotations

import shlex

from streams.bridge.slurm_parse import FAILED_STATES
from streams.config import Settings

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
