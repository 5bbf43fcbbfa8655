"""GET /forecast/paths/{src}/{dst} and /forecast/nodes/{node}: a series' statistic for the next
horizon, from its DuckDB history (409 with how much history is needed when there is too little)."""

from __future__ import annotations

from faust.web import Request, Response

from schemas.api import ErrorBody, ForecastAnswer
from sinks.duckdb_store import StoreError
from streams.analytics import stop_if_abandoned
from streams.analytics.forecasts import NotEnoughHistory, forecast_path
from streams.web.base import Resource
from streams.web.params import check_ids, forecast_query


def after_warm(warmer, fn, *args, cancel=None, **kw):
    """``fn(*args, **kw)`` once the kernels are compiled (in the request's thread, never the event
    loop's), unless the request went meanwhile (``cancel`` set)."""
    if warmer is not None:
        warmer.done.wait()
    stop_if_abandoned(cancel, "the kernels were compiled")
    return fn(*args, **kw)


async def forecast_answer(view: Resource, request: Request, src: str, dst: str) -> Response:
    q = forecast_query(request.query, view.ctx.settings.forecast_step_seconds)
    if isinstance(q, ErrorBody):
        return view.answer(q, 400)
    warmer = getattr(view.ctx.readiness, "warmer", None)
    try:
        out = await view.ctx.heavy(after_warm, warmer, forecast_path, view.ctx.settings.duckdb_path, src, dst,
                                      q["metric"], q["stat"], q["step_s"], q["horizon_steps"],
                                      shown_steps=q["history_steps_shown"])
    except NotEnoughHistory as exc:
        return view.answer(ErrorBody(error="not enough history", detail=str(exc), needed_steps=exc.needed_steps,
                                     have_steps=exc.have_steps, step_s=exc.step_s,
                                     needed_seconds=exc.needed_steps * exc.step_s), 409)
    except StoreError as exc:
        return view.answer(ErrorBody(error="history unavailable", detail=str(exc)), 503)
    where = {"src": src, "dst": dst} if dst else {"node": src}
    return view.answer(ForecastAnswer(**where, metric=q["metric"], stat=q["stat"], step_s=q["step_s"],
                                      horizon_s=q["horizon_steps"] * q["step_s"], **out))


class ForecastPath(Resource):
    async def get(self, request: Request, src: str, dst: str) -> Response:
        if err := check_ids(src=src, dst=dst):
            return self.answer(err, 400)
        return await forecast_answer(self, request, src, dst)


class ForecastNode(Resource):
    async def get(self, request: Request, node: str) -> Response:
        """A node-local metric (bw_util, retrans_rate, power_mw, ...): the series with dst ''."""
        if err := check_ids(node=node):
            return self.answer(err, 400)
        return await forecast_answer(self, request, node, "")
