"""GET /openapi.json: the worker's API as OpenAPI 3.1, generated from the pydantic models of the
request and response bodies (``schemas/api.py``, ``schemas/sched.py``, ``schemas/quota.py``).

``OPERATIONS`` is the one description of every route and method: its parameters, request body and
answers by status. The tests check that every route in ``streams.web.routes.ROUTES`` and every
method its view implements is described, and every answer the integration tests receive validates
against this document (``tests/helpers/openapi.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from schemas.api import (
    ComputeAnswer,
    ErrorBody,
    ForecastAnswer,
    Health,
    IncidentsAnswer,
    NodeAnswer,
    NodeCommandBody,
    Page,
    PathAnswer,
    PowerSizing,
    QuotaAnswer,
    TaskAnswer,
    TaskCommand,
    TaskRecord,
)
from schemas.quota import QuotaSet
from schemas.sched import Task

TEXT = "text/plain"
HTML = "text/html"
ANY_JSON = "object"
ID = {"type": "string", "maxLength": 128}  # a malformed id is answered 400 with the pattern it misses


def q(name: str, description: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema or {"type": "string"}}


def p(name: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": ID}


PAGING = [q("offset", "first item (default 0)", {"type": "integer", "minimum": 0}),
          q("limit", "items per page (at most CNSCHED_PAGE_LIMIT_MAX)", {"type": "integer", "minimum": 1})]
FORECAST = [q("metric", "rtt_ms, loss, bw_util, ... (default rtt_ms; bw_util for nodes)"),
            q("stat", "mean, p50, p95, p99, min or max (default mean)"),
            q("horizon", "how far ahead: 60m, 2h, 3600s (default 60m)"),
            q("step", "resolution: 60s, 5m (default CNSCHED_FORECAST_STEP_SECONDS)"),
            q("history", "also answer with this much of the past (e.g. 6h; default none)")]
POWER = [q("window", "the smoothing window: a duration or samples (default 5min)"), q("interval", "resolution (default 1min)"),
         q("period", "history read (default 1d, at most 31d)"), q("margin", "power margin (default 1.2)"),
         q("dod", "depth of discharge (default 0.9)"), q("ramp_limit", "MW per minute the grid allows"),
         q("trailing", "trailing rather than block window (true/false)")]


@dataclass(frozen=True)
class Operation:
    path: str
    method: str
    summary: str
    answers: dict[int, object]  # status -> model, TEXT, HTML or ANY_JSON
    params: list[dict] = field(default_factory=list)
    body: type[BaseModel] | None = None
    writes: bool = False  # needs a write token
    body_required: bool = True


E = ErrorBody
OPERATIONS: tuple[Operation, ...] = (
    Operation("/metrics", "get", "Prometheus metrics", {200: TEXT}),
    Operation("/health", "get", "readiness", {200: Health, 503: Health}),
    Operation("/health/ready", "get", "readiness", {200: Health, 503: Health}),
    Operation("/health/live", "get", "liveness", {200: Health}),
    Operation("/openapi.json", "get", "this document", {200: ANY_JSON}),
    Operation("/ui", "get", "the operator's dashboard", {200: HTML}),
    Operation("/ui/{name}", "get", "the dashboard's script and style (app.js, style.css)", {200: TEXT, 404: TEXT},
              [p("name")]),
    Operation("/network/nodes/{node}", "get", "a node's network summary", {200: NodeAnswer, 400: E, 404: E},
              [p("node")]),
    Operation("/network/nodes", "get", "nodes' network summaries, a page", {200: Page[NodeAnswer], 400: E}, PAGING),
    Operation("/network/paths/{src}/{dst}", "get", "a path's latest windows and quality",
              {200: PathAnswer, 400: E, 404: E}, [p("src"), p("dst")]),
    Operation("/network/paths", "get", "paths, a page", {200: Page[PathAnswer], 400: E},
              [q("src", "only paths from this node"), *PAGING]),
    Operation("/compute/nodes/{node}", "get", "a node's compute report and scores",
              {200: ComputeAnswer, 400: E, 404: E}, [p("node")]),
    Operation("/compute/nodes", "get", "nodes' compute, a page", {200: Page[ComputeAnswer], 400: E}, PAGING),
    Operation("/forecast/paths/{src}/{dst}", "get", "a path metric's forecast",
              {200: ForecastAnswer, 400: E, 409: E, 503: E}, [p("src"), p("dst"), *FORECAST]),
    Operation("/forecast/nodes/{node}", "get", "a node metric's forecast",
              {200: ForecastAnswer, 400: E, 409: E, 503: E}, [p("node"), *FORECAST]),
    Operation("/power/{site}/smoothing", "get", "battery sizing on the site's power history",
              {200: PowerSizing, 400: E, 404: E, 409: E, 503: E}, [p("site"), *POWER]),
    Operation("/tasks/{task_id}", "get", "a task's record, history and estimate", {200: TaskRecord, 400: E, 404: E},
              [p("task_id")]),
    Operation("/tasks", "get", "task records, newest submission first, a page", {200: Page[TaskRecord], 400: E},
              [q("status", "only this status (queued, held, placed, running, finished, failed, expired, rejected, cancelled)",
                 {"type": "string", "enum": ["queued", "held", "placed", "running", "finished", "failed", "expired",
                                             "rejected", "cancelled"]}),
               q("team", "only this team's tasks ('' the default team)", {"type": "string", "maxLength": 128}),
               *PAGING]),
    Operation("/incidents", "get", "node failures open now", {200: IncidentsAnswer}),
    Operation("/tasks", "post", "submit a task (409: a different task has this id)",
              {200: TaskAnswer, 202: TaskAnswer, 409: E, 413: E, 415: E, 422: E, 429: E}, body=Task, writes=True),
    Operation("/tasks/{task_id}", "delete", "cancel a task (a placed or running one is stopped by its runner)",
              {200: TaskRecord, 202: TaskAnswer, 400: E, 404: E, 409: E, 413: E, 415: E, 422: E}, [p("task_id")],
              body=TaskCommand, writes=True, body_required=False),
    Operation("/tasks/{task_id}/{action}", "post", "hold or release a queued task, or change a task's priority",
              {200: TaskRecord, 202: TaskAnswer, 400: E, 404: E, 409: E, 413: E, 415: E, 422: E},
              [p("task_id"), {"name": "action", "in": "path", "required": True,
                              "schema": {"type": "string", "enum": ["hold", "release", "priority"]}}],
              body=TaskCommand, writes=True, body_required=False),
    Operation("/nodes/{node}/{action}", "post", "cordon, drain or uncordon a node",
              {200: ComputeAnswer, 202: TaskAnswer, 400: E, 404: E, 413: E, 415: E, 422: E},
              [p("node"), {"name": "action", "in": "path", "required": True,
                           "schema": {"type": "string", "enum": ["cordon", "drain", "uncordon"]}}],
              body=NodeCommandBody, writes=True, body_required=False),
    Operation("/quotas", "get", "the team quotas and their use", {200: QuotaAnswer}),
    Operation("/quotas", "put", "replace the team quotas", {200: QuotaAnswer, 202: E, 413: E, 415: E, 422: E},
              body=QuotaSet, writes=True),
)
# operationIds: what a generated client's methods are called
OPERATION_IDS = {
    ("/metrics", "get"): "getMetrics", ("/health", "get"): "getHealth", ("/health/ready", "get"): "getReadiness",
    ("/health/live", "get"): "getLiveness", ("/openapi.json", "get"): "getOpenApi", ("/ui", "get"): "getDashboard",
    ("/ui/{name}", "get"): "getDashboardFile", ("/network/nodes/{node}", "get"): "getNetworkNode",
    ("/network/nodes", "get"): "listNetworkNodes", ("/network/paths/{src}/{dst}", "get"): "getNetworkPath",
    ("/network/paths", "get"): "listNetworkPaths", ("/compute/nodes/{node}", "get"): "getComputeNode",
    ("/compute/nodes", "get"): "listComputeNodes", ("/forecast/paths/{src}/{dst}", "get"): "getPathForecast",
    ("/forecast/nodes/{node}", "get"): "getNodeForecast", ("/power/{site}/smoothing", "get"): "getPowerSmoothing",
    ("/tasks/{task_id}", "get"): "getTask", ("/tasks", "get"): "listTasks", ("/incidents", "get"): "listIncidents",
    ("/tasks", "post"): "submitTask", ("/tasks/{task_id}", "delete"): "cancelTask",
    ("/tasks/{task_id}/{action}", "post"): "commandTask", ("/nodes/{node}/{action}", "post"): "commandNode",
    ("/quotas", "get"): "getQuotas", ("/quotas", "put"): "replaceQuotas",
}
REASONS = {200: "OK", 202: "accepted, not yet applied", 400: "invalid request", 401: "no or wrong token",
           403: "token scope or origin refused", 404: "unknown id",
           409: "conflict: not enough history, a duplicate task id, or a command the task's status does not allow",
           413: "body over 1 MiB", 415: "not application/json", 422: "invalid body", 429: "rate limited",
           503: "not ready, or not answered in time"}


@functools.lru_cache(maxsize=1)
def document(version: str = "0.1.0") -> dict:
    """The OpenAPI 3.1 document."""
    models = {m for op in OPERATIONS for m in [*op.answers.values(), op.body]
              if isinstance(m, type) and issubclass(m, BaseModel)}
    ordered = sorted(models, key=lambda m: m.__name__)
    keys, defs = models_json_schema(
        [(m, "validation" if any(op.body is m for op in OPERATIONS) else "serialization") for m in ordered],
        ref_template="#/components/schemas/{model}")
    refs = {m: keys[(m, mode)] for (m, mode) in keys}
    paths: dict[str, dict] = {}
    for op in OPERATIONS:
        answers = {**op.answers, 401: E, 403: E} if op.writes else {**op.answers}
        answers.setdefault(503, E)  # the request timeout (streams/web/guard.py)
        entry = {"summary": op.summary, "operationId": OPERATION_IDS[(op.path, op.method)], "parameters": op.params,
                 "responses": {str(s): _answer(s, a, refs) for s, a in sorted(answers.items())}}
        if op.body is not None:
            entry["requestBody"] = {"required": op.body_required, "content": {"application/json": {"schema": refs[op.body]}}}
        if op.writes:
            entry["security"] = [{"bearer": []}]
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": "cnsched worker API", "version": version,
                 "description": "Network awareness, compute metering, scheduling, forecasts, power and quotas."},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def _answer(status: int, answer, refs: dict) -> dict:
    out: dict = {"description": REASONS.get(status, "")}
    if answer == TEXT:
        out["content"] = {TEXT: {"schema": {"type": "string"}}}
    elif answer == HTML:
        out["content"] = {HTML: {"schema": {"type": "string"}}}
    elif answer == ANY_JSON:
        out["content"] = {"application/json": {"schema": {"type": "object"}}}
    else:
        out["content"] = {"application/json": {"schema": refs[answer]}}
    return out
