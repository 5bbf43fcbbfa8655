"""GET /compute/nodes[/{node}]: what each node can compute, answered by the owner of `compute`; POST
/nodes/{node}/cordon|drain|uncordon: node maintenance (sent to `sched.maintenance`)."""

from __future__ import annotations

import math
import time

from faust.web import Request, Response
from pydantic import ValidationError

from schemas.api import (
    ComputeAnswer,
    DrainBody,
    ErrorBody,
    NodeCommandBody,
    TaskAnswer,
    field_errors,
    read_body,
)
from schemas.operations import NodeCommand
from streams.adapters.inventory import scored
from streams.web.base import NotAllowed, Resource, acting, auth_of, until_applied, until_gone
from streams.web.params import check_ids


def compute_view(ctx) -> list[ComputeAnswer]:
    return versioned_compute_view(ctx)[1]


def versioned_compute_view(ctx) -> tuple[tuple, list[ComputeAnswer]]:
    """Every node's report and scores, with the scheduler's books beside its report (booked, free,
    state, tasks) when this worker runs the scheduler. Built once per second while neither the
    inventory nor the scheduler changed: a burst of 1,000 GET /compute/nodes built it 1,000 times
    (p50 50-56 s at 200 nodes, 26 s with this, 7-11 s at 6fdafa7: issue 32, finding 5; the rest is
    rendering each answer: Resource.paged renders a page once per version). With the version:
    (inventory, scheduler, second)."""
    now = time.time()
    key = (ctx.inv.version, ctx.scheduler.version if ctx.scheduler is not None else None, math.floor(now))
    cached = ctx.memo.get("compute_view")
    if cached is not None and cached[0] == key:
        return cached
    ctx.memo["compute_view"] = (key, _compute_view(ctx, now))
    return ctx.memo["compute_view"]


def _compute_view(ctx, now: float) -> list[ComputeAnswer]:
    s = ctx.settings
    books = {b.node: b for b in ctx.scheduler.node_books(now)} if ctx.scheduler is not None else {}
    out = []
    for item in scored(ctx.inv.records(), s.conversion_table, s.benchmark_table, now, s.node_timeout_seconds):
        b = books.get(item["node"])
        if b is not None:
            item |= {"state": b.state, "state_reason": b.reason or None, "cards": b.cards, "cards_reported_free": b.reported_free,
                     "cards_booked": b.booked, "cards_free": b.free, "tasks": b.tasks}
        out.append(ComputeAnswer(**item))
    return out


class ComputeNode(Resource):
    routed = "inv"

    async def get(self, request: Request, node: str) -> Response:
        if err := check_ids(node=node):
            return self.answer(err, 400)
        for item in compute_view(self.ctx):
            if item.node == node:
                return self.answer(item)
        return self.answer(ErrorBody(error="unknown node", node=node), 404)


class ComputeNodes(Resource):
    routed = "inv"

    async def get(self, request: Request) -> Response:
        version, answers = versioned_compute_view(self.ctx)
        return self.paged(request, answers, lambda item: item, version=version)


ACTIONS = ("cordon", "drain", "uncordon", "remove")
STATE_AFTER = {"cordon": "cordoned", "drain": "draining", "uncordon": "up"}


def node_command_view(action: str) -> type[Resource]:
    """POST /nodes/{node}/cordon, /drain or /uncordon."""

    async def post(self, request: Request, node: str) -> Response:
        return await node_command(self, request, node, action)

    return type(f"Node{action.title()}View", (Resource,), {"post": post, "__doc__": f"POST /nodes/{{node}}/{action}"})


async def node_command(view: Resource, request: Request, node: str, action: str) -> Response:
    """Cordon, drain or uncordon a node; the node's compute answer once the scheduler applied it
    (202 if not within CNSCHED_DECISION_TIMEOUT_SECONDS)."""
    if err := check_ids(node=node):
        return view.answer(err, 400)
    raw = await request.read() if request.can_read_body else b""
    try:
        body = read_body(DrainBody if action == "drain" else NodeCommandBody, raw, required=False)
    except ValidationError as exc:
        return view.answer(ErrorBody(error="invalid request", fields=field_errors(exc)), 422)
    ctx = view.ctx
    auth = auth_of(request)
    before = await node_answer(ctx, node, auth)
    if before is None:
        return view.answer(ErrorBody(error="unknown node", node=node), 404)
    try:
        by = acting(request, body.by)
    except NotAllowed as exc:
        return view.answer(ErrorBody(error="forbidden", detail=str(exc)), 403)
    cmd = NodeCommand(node=node, action=action, at=time.time(), deadline_s=getattr(body, "deadline_s", None),
                      by=by, reason=body.reason)
    await ctx.maintenance_topic.send(key=node.encode(), value=cmd.model_dump_json(exclude_none=True).encode())
    if action == "remove":
        return view.answer(*await until_gone(ctx, lambda: node_answer(ctx, node, auth), node, "removed",
                                             "gone from the inventory; its incident, if any, is recovered as removed"))
    want = STATE_AFTER[action]
    now = await until_applied(ctx, lambda: node_answer(ctx, node, auth),
                              lambda a: a.state == want or (want == "up" and a.state == "down"))
    if now is not None:
        return view.answer(now)
    return view.answer(TaskAnswer(task_id=node, status="accepted",
                                  detail=f"{action} sent; see GET /compute/nodes/{node}"), 202)


async def node_answer(ctx, node: str, headers: dict) -> ComputeAnswer | None:
    """The node's compute answer from the worker that owns the inventory (None: unknown, or no answer)."""
    def local():
        return next((item.body() for item in compute_view(ctx) if item.node == node), None)

    got = await ctx.from_owner(ctx.inv.table, f"/compute/nodes/{node}", local, headers)
    return ComputeAnswer.model_validate(got) if isinstance(got, dict) else None
