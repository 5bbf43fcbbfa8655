"""Task records in the `tasks` table (schemas.api.TaskRecord): the task, its status, where it runs,
what the scheduler needs to resume it, and its history. Written with an explicit partition (0) so
that timers can write them too; a restarted owner restores the scheduler from them."""

from __future__ import annotations

import math

from schemas.api import RunningState, ServiceState, TaskRecord
from schemas.sched import Task

HISTORY_KEPT = 50
ENDED = ("finished", "failed", "expired", "rejected", "cancelled")  # statuses a record never leaves


class TaskBook:
    def __init__(self, table) -> None:
        self.table = table
        self._parsed: dict[bytes, tuple[bytes, TaskRecord]] = {}  # key -> (the value parsed, its record)

    def get(self, task_id: str) -> TaskRecord | None:
        key = task_id.encode()
        raw = self.table.get(key)
        return self._record(key, raw) if raw else None

    def all(self) -> list[TaskRecord]:
        """Every record (GET /tasks and the dashboard read them all every few seconds)."""
        out = [self._record(key, raw) for key, raw in list(self.table.items()) if raw]
        if len(self._parsed) > len(out):  # records gone from the table are forgotten
            self._parsed = {k: v for k, v in self._parsed.items() if k in self.table}
        return out

    def _record(self, key: bytes, raw: bytes) -> TaskRecord:
        """The record a stored value holds; a value parsed before and unchanged since is not parsed
        again. Records are not to be changed in place."""
        hit = self._parsed.get(key)
        if hit is None or not (hit[0] is raw or hit[0] == raw):
            hit = self._parsed[key] = (raw, TaskRecord.model_validate_json(raw))
        return hit[1]

    async def forget(self, task_id: str) -> None:
        """The record leaves the live view (a tombstone on the changelog); its history stays in DuckDB."""
        key = task_id.encode()
        self.table.data.pop(key, None)
        self._parsed.pop(key, None)
        await self.table.changelog_topic.send(key=key, value=None, partition=0)

    async def put(self, record: TaskRecord) -> None:
        key = record.task["id"].encode()
        value = record.model_dump_json(by_alias=True).encode()
        self.table.data[key] = value
        await self.table.changelog_topic.send(key=key, value=value, partition=0)


QUEUE_FULL = "queue_full"  # a new task refused because CNSCHED_MAX_QUEUED_TASKS wait already


def refused(rec) -> bool:
    """The task's record says it was refused at submission (impossible on the cluster as it is, a team
    no quota names, the queue full): it holds no id, so a task may be submitted again under it."""
    return rec is not None and rec.status == "rejected" and bool(rec.history) and "rejected" in rec.history[-1]


def running_state(run) -> RunningState | None:
    """What a restarted scheduler needs of a running task (``run``: scheduling.state.Running)."""
    if run is None:
        return None
    def known(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return RunningState(alpha=run.alpha, profile=run.profile, placed_at=run.placed_at,
                        baseline_p95=known(run.baseline_p95), cooldown_until=run.cooldown_until, moves=run.moves,
                        baseline_loss=known(run.baseline_loss), seen_window_end=known(run.seen_window_end),
                        checkpoint_at=known(run.checkpoint_at), checkpoint_gb=known(run.checkpoint_gb),
                        restarts=run.restarts, started=run.started, ran_s=run.ran_s,
                        start_at=run.start_at)


def updated(rec: TaskRecord | None, task: Task | None, status: str, nodes: list[str], entry: dict | None,
            running: RunningState | None, service: ServiceState | None = None) -> TaskRecord:
    """The record (a new one for ``task`` when there is none) with a new status and history entry (none:
    ``entry`` None); a scaled service's state kept unless a new one is given."""
    if rec is None:
        rec = TaskRecord(task=task.model_dump(mode="json"), status=status)
    history = rec.history if entry is None else (rec.history + [entry])[-HISTORY_KEPT:]
    return rec.model_copy(update={"status": status, "nodes": nodes, "running": running,
                                  "service": service or rec.service, "history": history})


def same_task(stored: dict, task: Task) -> bool:
    """Whether ``task`` is the stored one again (a redelivery), not a different task under its id: equal
    in every field but its priority (an operator may have changed it since) and, when the new one has
    none, its submission time (the first arrival set it)."""
    new, old = task.model_dump(mode="json"), dict(stored)
    for key in ("priority",) + (("submitted_at",) if task.submitted_at is None else ()):
        new.pop(key, None)
        old.pop(key, None)
    return new == old
