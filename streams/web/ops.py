"""GET /metrics (Prometheus exposition), /health and /openapi.json."""

from __future__ import annotations

from faust.web import Request, Response

from schemas.api import Health
from streams.web.base import Resource


class Metrics(Resource):
    async def get(self, request: Request) -> Response:
        return self.text(self.ctx.counters.exposition(), content_type="text/plain; version=0.0.4")


class HealthView(Resource):
    """Readiness (see streams/worker/health.py): 200 when ready, 503 with the problems otherwise."""

    async def get(self, request: Request) -> Response:
        problems = self.ctx.readiness.problems() if self.ctx.readiness is not None else []
        if problems:
            return self.answer(Health(status="not_ready", app=self.ctx.app.conf.id, problems=problems), 503)
        return self.answer(Health(status="ok", app=self.ctx.app.conf.id))


class LiveView(Resource):
    """Liveness: the worker's event loop answers."""

    async def get(self, request: Request) -> Response:
        return self.answer(Health(status="ok", app=self.ctx.app.conf.id))


class OpenApi(Resource):
    """The API's OpenAPI 3.1 document (streams/web/openapi.py)."""

    async def get(self, request: Request) -> Response:
        from streams.web.openapi import document

        return self.json(document(page_limit_max=self.ctx.settings.page_limit_max))
