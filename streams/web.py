"""HTTP views of the worker (Faust web)."""

from __future__ import annotations

import faust
from faust.web import Request, Response, View

from streams.metrics import Counters


def register(app: faust.App, counters: Counters) -> None:
    @app.page("/metrics")
    class Metrics(View):
        async def get(self, request: Request) -> Response:
            return self.text(counters.exposition(), content_type="text/plain; version=0.0.4")

    @app.page("/health")
    class Health(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok", "app": app.conf.id})
