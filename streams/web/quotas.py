"""GET /quotas (the quota set in force and each team's use of it, answered by the worker that owns the
quota table) and PUT /quotas (replace the whole set: 422 with field errors when it is invalid or its
guarantees exceed the cluster; 200 once applied; 202 when the owner has not answered in time)."""

from __future__ import annotations

import time

from faust.web import Request, Response
from pydantic import ValidationError

from schemas.api import ErrorBody, FieldError, QuotaAnswer, field_errors, read_body
from schemas.quota import QuotaSet
from streams.web.base import Resource, WebContext, auth_of, until_applied


def quota_answer(ctx: WebContext) -> QuotaAnswer:
    """The set in force with every team's use (per class of the inventory and in all)."""
    qs = ctx.quotas.book.set  # the set in force
    usage = ctx.scheduler.quota_usage(time.time()) if ctx.scheduler is not None else []
    return QuotaAnswer(quotas=[q.model_dump(mode="json") for q in qs.quotas], changed_at=qs.changed_at,
                       usage=usage, rejected=ctx.quotas.rejected())


class Quotas(Resource):
    routed = "quotas"

    async def get(self, request: Request) -> Response:
        return self.answer(quota_answer(self.ctx))

    async def put(self, request: Request) -> Response:
        raw = await request.read()
        try:
            qs = read_body(QuotaSet, raw)  # exactly the types /openapi.json names
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                return self.answer(ErrorBody(error="invalid quotas", fields=[FieldError(field="body", reason="not JSON")]), 422)
            return self.answer(ErrorBody(error="invalid quotas", fields=field_errors(exc)), 422)
        qs = qs.model_copy(update={"changed_at": time.time()})
        await self.ctx.quotas_topic.send(key=b"quotas", value=qs.model_dump_json().encode())
        auth = auth_of(request)

        def rejected(a: dict) -> dict:
            return a.get("rejected") or {}

        now = await until_applied(self.ctx, lambda: owner_answer(self.ctx, auth),
                                  lambda a: qs.changed_at in (a.get("changed_at"), rejected(a).get("changed_at")))
        if now is not None and now.get("changed_at") == qs.changed_at:
            return self.json(now)
        if now is not None:  # valid quotas the cluster as it is cannot honour: a conflict with its state
            fields = rejected(now)["fields"]
            error = "quotas strand live tasks" if [f["field"] for f in fields] == ["quotas"] else "quotas exceed the cluster"
            return self.answer(ErrorBody(error=error, fields=fields), 409)
        return self.answer(ErrorBody(error="accepted", detail="not applied yet; see GET /quotas"), 202)


async def owner_answer(ctx: WebContext, headers: dict) -> dict | None:
    """GET /quotas as the owner of the quota table answers it (None while it is unknown)."""
    return await ctx.from_owner(ctx.quotas.table, "/quotas", lambda: quota_answer(ctx).body(), headers)
