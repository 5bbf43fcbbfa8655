"""POST /tasks (submit, answer with the decision) and GET /tasks/{id} (the task's record, answered
by the worker that owns the `tasks` table)."""

from __future__ import annotations

import time
from typing import get_args

from faust.web import Request, Response
from pydantic import ValidationError

from schemas.api import (
    ErrorBody,
    FieldError,
    IncidentsAnswer,
    RoutesAnswer,
    SummaryAnswer,
    TaskAnswer,
    TaskCommand,
    TaskEstimate,
    TaskPriorityCommand,
    TaskRecord,
    field_errors,
    read_body,
)
from schemas.sched import Task, TaskEvent
from streams.web.base import (
    NotAllowed,
    Resource,
    WebContext,
    acting,
    auth_of,
    until_applied,
    until_gone,
)
from streams.web.params import check_ids
from streams.worker.taskbook import ENDED, refused, same_task

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


    async def delete(self, request: Request, task_id: str) -> Response:
        """Cancel: a queued or held task ends; a placed or running one gets a `cancelled` decision its
        runner acts on (its cards are held until the runner confirms). 409 once it has ended."""
        return await command(self, request, task_id, "cancel")


def task_command_view(action: str) -> type[Resource]:
    """POST /tasks/{id}/hold, /release or /priority (body ``{"priority": n}``); ``by``, ``reason``."""

    async def post(self, request: Request, task_id: str) -> Response:
        return await command(self, request, task_id, action)

    return type(f"Task{action.title()}View", (Resource,), {"post": post, "__doc__": f"POST /tasks/{{id}}/{action}"})


# the statuses each command applies to (otherwise 409)
APPLIES = {"cancel": lambda s: s not in ENDED, "hold": lambda s: s == "queued", "release": lambda s: s == "held",
           "priority": lambda s: s not in ENDED, "delete": lambda s: s in ENDED}


async def command(view: Resource, request: Request, task_id: str, action: str) -> Response:
    """Send an operator's command to sched.events and answer with the task's record once the owner
    applied it (202 if not within CNSCHED_DECISION_TIMEOUT_SECONDS)."""
    if err := check_ids(task_id=task_id):
        return view.answer(err, 400)
    raw = await request.read() if request.can_read_body else b""
    try:
        body = read_body(TaskPriorityCommand if action == "priority" else TaskCommand, raw,
                         required=action == "priority")
    except ValidationError as exc:
        return view.answer(ErrorBody(error="invalid request", fields=field_errors(exc)), 422)
    ctx = view.ctx
    auth = auth_of(request)
    rec = await task_record(ctx, task_id, auth)
    if rec is None:
        return view.answer(ErrorBody(error="unknown task", task_id=task_id), 404)
    if not APPLIES[action](rec.status) or rec.task.get("scaling") is not None:
        what = "a scaled service" if rec.task.get("scaling") is not None else f"a {rec.status} task"
        return view.answer(ErrorBody(error="conflict", task_id=task_id, status=rec.status,
                                     detail=f"{action} does not apply to {what}"), 409)
    try:
        by = acting(request, body.by)
    except NotAllowed as exc:
        return view.answer(ErrorBody(error="forbidden", detail=str(exc)), 403)
    ev = TaskEvent(task_id=task_id, event=action, at=time.time(), priority=getattr(body, "priority", None),
                   by=by, reason=body.reason)
    await ctx.events_topic.send(key=task_id.encode(), value=ev.model_dump_json(exclude_none=True).encode())
    if action == "delete":
        return view.answer(*await until_gone(ctx, lambda: task_record(ctx, task_id, auth), task_id, "deleted",
                                             "gone from the live view; its history stays in DuckDB (decisions, "
                                             "task_events)"))
    now = await until_applied(ctx, lambda: task_record(ctx, task_id, auth),
                              lambda a: a.status != rec.status or a.history[-1:] != rec.history[-1:])
    if now is not None:
        return view.answer(now)
    return view.answer(TaskAnswer(task_id=task_id, status="accepted",
                                  detail=f"{action} sent; see GET /tasks/{task_id}"), 202)


class Tasks(Resource):
    routed = "tasks"

    async def get(self, request: Request) -> Response:
        """A page of task records, newest submission first; ``status`` and ``team`` keep one status
        or team; queued and running tasks carry their estimate (what a queued one waits for)."""
        status, team = request.query.get("status"), request.query.get("team")
        if status is not None and status not in STATUSES:
            return self.answer(ErrorBody(error="invalid request", fields=[FieldError(
                field="status", value=status, reason=f"must be one of {', '.join(STATUSES)}")]), 400)
        if team is not None and len(team) > 128:
            return self.answer(ErrorBody(error="invalid request", fields=[FieldError(
                field="team", reason="at most 128 characters")]), 400)
        records = [r for r in self.ctx.tasks.all() if (status is None or r.status == status)
                   and (team is None or r.task.get("team", "") == team)]
        records.sort(key=lambda r: (-(r.task.get("submitted_at") or 0.0), r.task.get("id", "")))
        view = self.ctx.scheduler

        def render(page: list[TaskRecord]) -> list[TaskRecord]:
            live = [r.task["id"] for r in page if r.status in ("queued", "held", "placed", "running")]
            est = view.estimates(live, time.time()) if view is not None and live else {}
            return [r.model_copy(update={"estimate": est[r.task["id"]]}) if r.task["id"] in est else r for r in page]

        return self.paged(request, records, lambda r: r, render_page=render)

    async def post(self, request: Request) -> Response:
        """Submit a task: 422 with field errors, else the decision once it is made (202 after
        CNSCHED_DECISION_TIMEOUT_SECONDS without one)."""
        raw = await request.read()  # at most 1 MiB (streams/web/guard.py)
        try:
            # exactly the types /openapi.json names ("1" is not a number here, 0 not a boolean); nesting
            # depth is bounded by the parser: a 422, never a 500
            task = read_body(Task, raw)
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                return self.answer(ErrorBody(error="invalid task",
                                             fields=[FieldError(field="body", reason="not JSON")]), 422)
            return self.answer(ErrorBody(error="invalid task", fields=field_errors(exc)), 422)
        try:  # the submitter: the token's name (another only for a token that may act for others)
            task = task.model_copy(update={"submitted_by": acting(request, task.submitted_by)})
        except NotAllowed as exc:
            return self.answer(ErrorBody(error="forbidden", detail=str(exc)), 403)
        auth = auth_of(request)
        before = await task_record(self.ctx, task.id, auth)
        if before is not None and not refused(before):  # a task refused at submission took no id
            # a retried submission answers as the first did; another task is refused
            if not same_task(before.task, task):
                return self.answer(ErrorBody(error="duplicate task id", task_id=task.id, status=before.status,
                                             detail="a different task with this id is known; choose another id"), 409)
            last = before.history[-1] if before.history else {}
            return self.answer(TaskAnswer(task_id=task.id, status=before.status, nodes=before.nodes,
                                          decision=last.get("decision"), detail="submitted before"))
        known = 0 if before is None else len(before.history)  # a task refused for room: its answer is new
        if task.submitted_at is None:
            task = task.model_copy(update={"submitted_at": time.time()})
        await self.ctx.tasks_topic.send(key=task.id.encode(), value=task.model_dump_json().encode())
        rec = await until_applied(self.ctx, lambda: task_record(self.ctx, task.id, auth),
                                  lambda a: len(a.history) > known)
        if rec is not None:
            if rec.status == "rejected":  # e.g. a team no quota names
                why = rec.history[-1].get("rejected", {})
                if why.get("reason") == "queue_full":  # not the task's fault: later it may go
                    return self.json({"error": "queue full", "detail": why.get("detail", "")}, status=503,
                                     headers={"Retry-After": "60"})
                # a valid task the cluster as it is turns away (a team no quota names, more cards
                # than any node has): a conflict with its state, not a malformed request
                return self.answer(ErrorBody(error="task rejected", fields=[FieldError(
                    field=why.get("field", "body"), reason=why.get("detail", "rejected"))]), 409)
            return self.answer(TaskAnswer(task_id=task.id, status=rec.status, nodes=rec.nodes,
                                          decision=rec.history[-1].get("decision"), detail=_unusual(task)))
        return self.answer(TaskAnswer(task_id=task.id, status="accepted",
                                      detail="no decision yet; see GET /tasks/" + task.id), 202)


LONG_S = 30 * 86_400.0  # an expected duration beyond a month is more often milliseconds than a job


def _unusual(task: Task) -> str | None:
    """A warning the answer carries about a valid task that was probably meant otherwise."""
    d = task.expected_duration_s
    if d > LONG_S:
        return (f"warning: expected_duration_s {d:g} is {d / 86_400:.1f} days; it is in seconds "
                f"(did you mean {d / 1000:g} s?)")
    return None


def estimate(ctx: WebContext, task_id: str) -> TaskEstimate | None:
    """The scheduler's estimate for a running task (its end) or the queue's head (its reservation)."""
    return None if ctx.scheduler is None else ctx.scheduler.estimate(task_id, time.time())


async def task_record(ctx: WebContext, task_id: str, headers: dict | None = None) -> TaskRecord | None:
    """The task's record: from this worker's table when it owns it, else from the owner's API
    (None while the owner is unknown or rebalancing: the caller asks again)."""
    got = await ctx.from_owner(ctx.tasks.table, f"/tasks/{task_id}", lambda: ctx.tasks.get(task_id), headers)
    return TaskRecord.model_validate(got) if isinstance(got, dict) else got


class Summary(Resource):
    """GET /summary: the cluster's totals from the scheduler (tasks by status over every record, nodes
    by state, cards, the queue per team and class); the owner of the tasks table runs it."""

    routed = "tasks"

    async def get(self, request: Request) -> Response:
        view = self.ctx.scheduler
        statuses = [r.status for r in self.ctx.tasks.all()]
        if view is None:
            return self.answer(SummaryAnswer(tasks={}, nodes={}, cards_up=0, cards_booked=0, cards_free=0,
                                             queues=[]))
        return self.answer(view.summary(time.time(), statuses))


class Incidents(Resource):
    """GET /incidents: open node failures, from the scheduler (the owner of the tasks table runs it)."""

    routed = "tasks"

    async def get(self, request: Request) -> Response:
        view = self.ctx.scheduler
        incidents = [] if view is None else view.open_incidents()
        return self.answer(IncidentsAnswer(open=[i.model_dump(mode="json") for i in incidents]))


class ServiceRoutes(Resource):
    """GET /services/{id}/routes: the service's routing weights per origin (what sched.routes carries);
    the owner of the tasks table runs it. 404: no elastic service of that id is live."""

    routed = "tasks"

    async def get(self, request: Request, service_id: str) -> Response:
        if err := check_ids(service_id=service_id):
            return self.answer(err, 400)
        view = self.ctx.scheduler
        routes = None if view is None else view.routes(service_id, time.time())
        if routes is None:
            return self.answer(ErrorBody(error="unknown service", service_id=service_id), 404)
        return self.answer(RoutesAnswer.model_validate(routes.model_dump()))
