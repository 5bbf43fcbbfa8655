"""GET /metrics (Prometheus exposition) and /health."""

from __future__ import annotations

from faust.web import Request, Response

from schemas.api import Health
from streams.web.base import Resource


class Metrics(Resource):
    async def get(self, request: Request) -> Response:
        return self.text(self.ctx.counters.exposition(), content_type="text/plain; version=0.0.4")


class HealthView(Resource):
    async def get(self, request: Request) -> Response:
        return self.answer(Health(status="ok", app=self.ctx.app.conf.id))
