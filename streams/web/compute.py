"""GET /compute/nodes[/{node}]: what each node can compute, answered by the owner of `compute`."""

from __future__ import annotations

import time

from faust.web import Request, Response

from schemas.api import ComputeAnswer, ErrorBody
from streams.adapters.inventory import scored
from streams.web.base import Resource
from streams.web.params import check_ids


def compute_view(ctx) -> list[ComputeAnswer]:
    """Every node's report and scores, with the scheduler's books beside its report (booked, free,
    state, tasks) when this worker runs the scheduler."""
    s, now = ctx.settings, time.time()
    books = {b.node: b for b in ctx.scheduler.node_books(now)} if ctx.scheduler is not None else {}
    out = []
    for item in scored(ctx.inv.records(), s.conversion_table, s.benchmark_table, now, s.node_timeout_seconds):
        b = books.get(item["node"])
        if b is not None:
            item |= {"state": b.state, "cards": b.cards, "cards_reported_free": b.reported_free,
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
        return self.paged(request, compute_view(self.ctx), lambda item: item)
