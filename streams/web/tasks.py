"""POST /tasks (submit, answer with the decision) and GET /tasks/{id} (the task's record, answered
by the worker that owns the `tasks` table)."""

from __future__ import annotations

import asyncio
import time
from typing import get_args

from faust.web import Request, Response
from pydantic import ValidationError

from schemas.api import (
    ErrorBody,
    FieldError,
    IncidentsAnswer,
    TaskAnswer,
    TaskEstimate,
    TaskRecord,
    field_errors,
)
from schemas.sched import Task
from streams.web.base import Resource, WebContext
from streams.web.params import check_ids

POLL_S = 0.05
STATUSES = get_args(TaskRecord.model_fields["status"].annotation)


class TaskView(Resource):
    routed = "tasks"

    async def get(self, request: Request, task_id: str) -> Response:
        if err := check_ids(task_id=task_id):
            return self.answer(err, 400)
        rec = self.ctx.tasks.get(task_id)
        if rec is None:
            return self.answer(ErrorBody(error="unknown task", task_id=task_id), 404)
        est = estimate(self.ctx, task_id)
        return self.answer(rec.model_copy(update={"estimate": est}) if est else rec)


class Tasks(Resource):
    routed = "tasks"

    async def get(self, request: Request) -> Response:
        """A page of task records, newest submission first; ``status`` keeps one status."""
        status = request.query.get("status")
        if status is not None and status not in STATUSES:
            return self.answer(ErrorBody(error="invalid request", fields=[FieldError(
                field="status", value=status, reason=f"must be one of {', '.join(STATUSES)}")]), 400)
        records = [r for r in self.ctx.tasks.all() if status is None or r.status == status]
        records.sort(key=lambda r: (-(r.task.get("submitted_at") or 0.0), r.task.get("id", "")))
        return self.paged(request, records, lambda r: r)

    async def post(self, request: Request) -> Response:
        """Submit a task: 422 with field errors, else the decision once it is made (202 after
        CNSCHED_DECISION_TIMEOUT_SECONDS without one)."""
        raw = await request.read()  # at most 1 MiB (streams/web/guard.py)
        try:
            task = Task.model_validate_json(raw)  # nesting depth is bounded by the parser: a 422, never a 500
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                return self.answer(ErrorBody(error="invalid task",
                                             fields=[FieldError(field="body", reason="not JSON")]), 422)
            return self.answer(ErrorBody(error="invalid task", fields=field_errors(exc)), 422)
        if task.submitted_at is None:
            task = task.model_copy(update={"submitted_at": time.time()})
        auth = {"Authorization": request.headers["Authorization"]} if "Authorization" in request.headers else {}
        before = await task_record(self.ctx, task.id, auth)
        known = len(before.history) if before else 0
        await self.ctx.tasks_topic.send(key=task.id.encode(), value=task.model_dump_json().encode())
        deadline = time.monotonic() + self.ctx.settings.decision_timeout_seconds
        while time.monotonic() < deadline:
            rec = await task_record(self.ctx, task.id, auth)
            if rec is not None and len(rec.history) > known:
                if rec.status == "rejected":  # e.g. a team no quota names
                    why = rec.history[-1].get("rejected", {})
                    return self.answer(ErrorBody(error="task rejected", fields=[FieldError(
                        field=why.get("field", "body"), reason=why.get("detail", "rejected"))]), 422)
                return self.answer(TaskAnswer(task_id=task.id, status=rec.status, nodes=rec.nodes,
                                              decision=rec.history[-1].get("decision")))
            await asyncio.sleep(POLL_S)
        return self.answer(TaskAnswer(task_id=task.id, status="accepted",
                                      detail="no decision yet; see GET /tasks/" + task.id), 202)


def estimate(ctx: WebContext, task_id: str) -> TaskEstimate | None:
    """The scheduler's estimate for a running task (its end) or the queue's head (its reservation)."""
    return None if ctx.scheduler is None else ctx.scheduler.estimate(task_id, time.time())


async def task_record(ctx: WebContext, task_id: str, headers: dict | None = None) -> TaskRecord | None:
    """The task's record: from this worker's table when it owns it, else from the owner's API
    (None while the owner is unknown or rebalancing: the caller asks again)."""
    got = await ctx.from_owner(ctx.tasks.table, f"/tasks/{task_id}", lambda: ctx.tasks.get(task_id), headers)
    return TaskRecord.model_validate(got) if isinstance(got, dict) else got


class Incidents(Resource):
    """GET /incidents: open node failures, from the scheduler (the owner of the tasks table runs it)."""

    routed = "tasks"

    async def get(self, request: Request) -> Response:
        view = self.ctx.scheduler
        incidents = [] if view is None else view.open_incidents()
        return self.answer(IncidentsAnswer(open=[i.model_dump(mode="json") for i in incidents]))
