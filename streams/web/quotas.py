"""GET /quotas (the quota set in force and each team's use of it, answered by the worker that owns the
quota table) and PUT /quotas (replace the whole set: 422 with field errors when it is invalid or its
guarantees exceed the cluster; 200 once applied; 202 when the owner has not answered in time)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
from faust.web import Request, Response
from pydantic import ValidationError

from schemas.api import ErrorBody, FieldError, QuotaAnswer, QuotaUsage, field_errors
from schemas.quota import ANY_CLASS, QuotaSet
from streams.web.base import Resource, WebContext

POLL_S = 0.05


def quota_answer(state) -> QuotaAnswer:
    """The set in force with every team's use (per class of the inventory and in all)."""
    sched = state.sched
    qs = sched.quotas.set
    nodes = sched.nodes(time.time())
    names = list(nodes.class_names) + [ANY_CLASS]
    usage = []
    if qs.quotas:
        g, m = sched.quotas.arrays(nodes.class_names)
        use = sched.quotas.use(list(sched.running.values()), nodes.index, nodes.node_class, len(nodes.class_names)).use
        queued = {}
        for p in sched.pending.values():
            t = sched.quotas.team_of(p.task)
            if t is not None and t >= 0:
                queued[t] = queued.get(t, 0) + 1
        own = {(q.team, q.accel_class) for q in qs.quotas}
        for ti, team in enumerate(sched.quotas.teams):
            for ci, cls in enumerate(names):
                if (team, cls) not in own and not (cls == ANY_CLASS or use[ti, ci]):
                    continue
                usage.append(QuotaUsage(team=team, accel_class=cls, guaranteed_cards=float(g[ti, ci]),
                                        max_cards=None if np.isinf(m[ti, ci]) else float(m[ti, ci]),
                                        used_cards=float(use[ti, ci]), borrowed_cards=float(max(use[ti, ci] - g[ti, ci], 0)),
                                        queued_tasks=queued.get(ti, 0) if cls == ANY_CLASS else 0))
    return QuotaAnswer(quotas=[q.model_dump(mode="json") for q in qs.quotas], changed_at=qs.changed_at,
                       usage=usage, rejected=state.rejected())


class Quotas(Resource):
    routed = "quotas"

    async def get(self, request: Request) -> Response:
        return self.answer(quota_answer(self.ctx.quotas))

    async def put(self, request: Request) -> Response:
        raw = await request.read()
        try:
            qs = QuotaSet.model_validate_json(raw)
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                return self.answer(ErrorBody(error="invalid quotas", fields=[FieldError(field="body", reason="not JSON")]), 422)
            return self.answer(ErrorBody(error="invalid quotas", fields=field_errors(exc)), 422)
        qs = qs.model_copy(update={"changed_at": time.time()})
        await self.ctx.quotas_topic.send(key=b"quotas", value=qs.model_dump_json().encode())
        auth = {"Authorization": request.headers["Authorization"]} if "Authorization" in request.headers else {}
        deadline = time.monotonic() + self.ctx.settings.decision_timeout_seconds
        while time.monotonic() < deadline:
            now = await owner_answer(self.ctx, auth)
            if now is not None and now.get("changed_at") == qs.changed_at:
                return self.json(now)
            rejected = (now or {}).get("rejected") or {}
            if rejected.get("changed_at") == qs.changed_at:
                return self.answer(ErrorBody(error="quotas exceed the cluster", fields=rejected["fields"]), 422)
            await asyncio.sleep(POLL_S)
        return self.answer(ErrorBody(error="accepted", detail="not applied yet; see GET /quotas"), 202)


async def owner_answer(ctx: WebContext, headers: dict) -> dict | None:
    """GET /quotas as the owner of the quota table answers it (None while it is unknown)."""
    return await ctx.from_owner(ctx.quotas.table, "/quotas", lambda: quota_answer(ctx.quotas).body(), headers)
