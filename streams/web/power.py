"""GET /power/{site}/smoothing: battery sizing from the site's stored power_mw windows over ``period``."""

from __future__ import annotations

from faust.web import Request, Response

from schemas.api import ErrorBody, PowerSizing
from sinks.duckdb_store import StoreError
from streams.analytics.power import TooFewSamples, size_site
from streams.web.base import Resource
from streams.web.params import check_ids, smoothing_query


class PowerSmoothing(Resource):
    async def get(self, request: Request, site: str) -> Response:
        if err := check_ids(site=site):
            return self.answer(err, 400)
        q = smoothing_query(request.query)
        if isinstance(q, ErrorBody):
            return self.answer(q, 400)
        try:
            out = await self.ctx.heavy(size_site, self.ctx.settings.duckdb_path, site, q)
        except TooFewSamples as exc:
            return self.answer(ErrorBody(error="not enough history", detail=str(exc), have_samples=exc.have,
                                         needed_samples=exc.needed), 409)
        except StoreError as exc:
            return self.answer(ErrorBody(error="history unavailable", detail=str(exc)), 503)
        if out is None:
            return self.answer(ErrorBody(error="no power_mw history for this site", site=site), 404)
        return self.answer(PowerSizing(**out))
