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
    DrainBody,
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
    RoutesAnswer,
    SummaryAnswer,
    TaskAnswer,
    TaskCommand,
    TaskPriorityCommand,
    TaskRecord,
)
from schemas.compute import NODE_ID_PATTERN
from schemas.quota import QuotaSet
from schemas.sched import Task
from sinks.queries import STATS
from streams.web.dashboard import ASSETS, TYPES
from streams.web.guard import OPEN_PATHS
from streams.web.params import DURATION_PATTERN, MAX_HORIZON_STEPS, METRIC_PATTERN, STEPS, TRUTH

TEXT = "text/plain"
HTML = "text/html"
ANY_JSON = "object"
ID = {"type": "string", "pattern": NODE_ID_PATTERN}  # node, site and task ids (streams/web/params.check_ids)
DURATION = {"type": "string", "pattern": DURATION_PATTERN}
PAGE_LIMIT_MAX = "page_limit_max"  # the limit's maximum is the worker's CNSCHED_PAGE_LIMIT_MAX (document())


def q(name: str, description: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema or {"type": "string"}}


def p(name: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema or ID}


def number(low: float, high: float, low_open: bool = True) -> dict:
    return {"type": "number", "exclusiveMinimum" if low_open else "minimum": low, "maximum": high}


PAGING = [q("offset", "first item (default 0)", {"type": "integer", "minimum": 0, "maximum": 10**9}),
          q("limit", "items per page (default 100; at most CNSCHED_PAGE_LIMIT_MAX)",
            {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX})]
FORECAST = [q("metric", "rtt_ms, loss, bw_util, ... (default rtt_ms; bw_util for nodes)",
              {"type": "string", "pattern": METRIC_PATTERN}),
            q("stat", "the statistic (default mean)", {"type": "string", "enum": list(STATS)}),
            q("horizon", "how far ahead (default 60m): rounded up to whole steps, at most "
              f"{MAX_HORIZON_STEPS:,} steps (longer is cut; horizon_s says)", DURATION),
            q("step", "resolution (default CNSCHED_FORECAST_STEP_SECONDS)", {"type": "string", "enum": list(STEPS)}),
            q("history", f"also answer with this much of the past (default none; at most {MAX_HORIZON_STEPS:,} steps)",
              DURATION)]
POWER = [q("window", "the smoothing window: a duration, rounded to whole intervals, or a number of intervals "
           "(default 5min)", DURATION),
         q("interval", "resolution (default 1min)", DURATION),
         q("period", "history read (default 1d; cut to 31d and to 1,000,000 intervals: from and to say)", DURATION),
         q("margin", "power margin (default 1.2)", number(0, 100)), q("dod", "depth of discharge (default 0.9)",
                                                                      number(0, 1)),
         q("ramp_limit", "MW per minute the grid allows (default none)", number(0, 1e6)),
         q("trailing", "trailing rather than block window (default false)",
           {"type": "string", "enum": list(TRUTH)})]


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
    Operation("/ui/{name}", "get", "the dashboard's script and style",
              {200: tuple(sorted({TYPES[n] for n in ASSETS})), 404: E},
              [p("name", {"type": "string", "enum": list(ASSETS)})]),
    Operation("/network/nodes/{node}", "get", "a node's network summary", {200: NodeAnswer, 400: E, 404: E},
              [p("node")]),
    Operation("/network/nodes", "get", "nodes' network summaries, a page", {200: Page[NodeAnswer], 400: E}, PAGING),
    Operation("/network/paths/{src}/{dst}", "get", "a path's latest windows and quality",
              {200: PathAnswer, 400: E, 404: E}, [p("src"), p("dst")]),
    Operation("/network/paths", "get", "paths, a page", {200: Page[PathAnswer], 400: E},
              [q("src", "only paths from this node", ID), *PAGING]),
    Operation("/compute/nodes/{node}", "get", "a node's compute report and scores",
              {200: ComputeAnswer, 400: E, 404: E}, [p("node")]),
    Operation("/compute/nodes", "get", "nodes' compute, a page", {200: Page[ComputeAnswer], 400: E}, PAGING),
    Operation("/forecast/paths/{src}/{dst}", "get", "a path metric's forecast",
              {200: ForecastAnswer, 400: E, 409: E, 429: E, 503: E}, [p("src"), p("dst"), *FORECAST]),
    Operation("/forecast/nodes/{node}", "get", "a node metric's forecast",
              {200: ForecastAnswer, 400: E, 409: E, 429: E, 503: E}, [p("node"), *FORECAST]),
    Operation("/power/{site}/smoothing", "get", "battery sizing on the site's power history",
              {200: PowerSizing, 400: E, 404: E, 409: E, 429: E, 503: E}, [p("site"), *POWER]),
    Operation("/tasks/{task_id}", "get", "a task's record, history and estimate", {200: TaskRecord, 400: E, 404: E},
              [p("task_id")]),
    Operation("/tasks", "get", "task records, newest submission first, a page", {200: Page[TaskRecord], 400: E},
              [q("status", "only this status (queued, held, placed, running, finished, failed, expired, rejected, cancelled)",
                 {"type": "string", "enum": ["queued", "held", "placed", "running", "finished", "failed", "expired",
                                             "rejected", "cancelled"]}),
               q("team", "only this team's tasks ('' the default team)", {"type": "string", "maxLength": 128}),
               *PAGING]),
    Operation("/incidents", "get", "node failures open now", {200: IncidentsAnswer}),
    Operation("/services/{service_id}/routes", "get", "an elastic service's routing weights per origin of its "
              "requests (what sched.routes carries)", {200: RoutesAnswer, 400: E, 404: E}, [p("service_id")]),
    Operation("/summary", "get", "the cluster's totals: tasks by status, nodes by state, cards, the queue per "
              "team and class", {200: SummaryAnswer}),
    Operation("/tasks", "post", "submit a task (409: a different task has this id, or the cluster as it is "
              "cannot take it; 503: the queue is full)",
              {200: TaskAnswer, 202: TaskAnswer, 409: E, 413: E, 415: E, 422: E, 429: E}, body=Task, writes=True),
    Operation("/tasks/{task_id}", "delete", "cancel a task (a placed or running one is stopped by its runner)",
              {200: TaskRecord, 202: TaskAnswer, 400: E, 404: E, 409: E, 413: E, 415: E, 422: E}, [p("task_id")],
              body=TaskCommand, writes=True, body_required=False),
    *(Operation(f"/tasks/{{task_id}}/{action}", "post", summary,
                {200: TaskRecord, 202: TaskAnswer, 400: E, 404: E, 409: E, 413: E, 415: E, 422: E}, [p("task_id")],
                body=body, writes=True, body_required=action == "priority")
      for action, summary, body in (("hold", "hold a queued task", TaskCommand),
                                    ("release", "release a held task", TaskCommand),
                                    ("priority", "change a task's priority", TaskPriorityCommand))),
    Operation("/tasks/{task_id}/delete", "post", "delete a finished, failed, expired, cancelled or rejected task from "
              "the live view (its history stays in DuckDB; 409 for a live task: cancel it first)",
              {200: TaskAnswer, 202: TaskAnswer, 400: E, 404: E, 409: E, 413: E, 415: E, 422: E}, [p("task_id")],
              body=TaskCommand, writes=True, body_required=False),
    *(Operation(f"/nodes/{{node}}/{action}", "post", summary,
                {200: ComputeAnswer, 202: TaskAnswer, 400: E, 404: E, 413: E, 415: E, 422: E}, [p("node")],
                body=body, writes=True, body_required=False)
      for action, summary, body in (("cordon", "close a node to new work", NodeCommandBody),
                                    ("drain", "move a node's work away at its checkpoints", DrainBody),
                                    ("uncordon", "open a node again", NodeCommandBody))),
    Operation("/nodes/{node}/remove", "post", "take a node out of the inventory (its incident closes as removed; a "
              "node agent that reports it again brings it back)",
              {200: TaskAnswer, 202: TaskAnswer, 400: E, 404: E, 413: E, 415: E, 422: E}, [p("node")],
              body=NodeCommandBody, writes=True, body_required=False),
    Operation("/quotas", "get", "the team quotas and their use", {200: QuotaAnswer}),
    Operation("/quotas", "put", "replace the team quotas (409: the guarantees exceed the cluster)",
              {200: QuotaAnswer, 202: E, 409: E, 413: E, 415: E, 422: E}, body=QuotaSet, writes=True),
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
    ("/services/{service_id}/routes", "get"): "getServiceRoutes",
    ("/summary", "get"): "getSummary",
    ("/tasks", "post"): "submitTask", ("/tasks/{task_id}", "delete"): "cancelTask",
    ("/tasks/{task_id}/hold", "post"): "holdTask", ("/tasks/{task_id}/release", "post"): "releaseTask",
    ("/tasks/{task_id}/priority", "post"): "setTaskPriority", ("/tasks/{task_id}/delete", "post"): "deleteTask", ("/nodes/{node}/cordon", "post"): "cordonNode",
    ("/nodes/{node}/drain", "post"): "drainNode", ("/nodes/{node}/uncordon", "post"): "uncordonNode",
    ("/nodes/{node}/remove", "post"): "removeNode",
    ("/quotas", "get"): "getQuotas", ("/quotas", "put"): "replaceQuotas",
}
REASONS = {200: "OK", 202: "accepted, not yet applied", 400: "invalid request", 401: "no or wrong token",
           403: "token scope refused, or a state change without a token from elsewhere than this host by its "
                "loopback name", 404: "unknown id", 405: "this path does not take this method (Allow names those it "
                "takes)",
           409: "conflict with the state: not enough history, a duplicate task id, a command the task's status "
                "does not allow, a valid task or quota set the cluster as it is cannot take",
           413: "body over 1 MiB", 415: "not application/json", 422: "invalid body", 429: "rate limited, or busy",
           503: "not ready, not answered in time, the DuckDB history unreadable, or the queue full"}
# every error is answered with the JSON error body (streams/web/guard.py makes aiohttp's own refusals so)
ERRORS = (400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 503)


@functools.lru_cache(maxsize=4)
def document(version: str = "0.1.0", page_limit_max: int = 1000) -> dict:
    """The OpenAPI 3.1 document (``page_limit_max``: the worker's CNSCHED_PAGE_LIMIT_MAX)."""
    models = {m for op in OPERATIONS for m in [*op.answers.values(), op.body]
              if isinstance(m, type) and issubclass(m, BaseModel)}
    ordered = sorted(models, key=lambda m: m.__name__)
    keys, defs = models_json_schema(
        [(m, "validation" if any(op.body is m for op in OPERATIONS) else "serialization") for m in ordered],
        ref_template="#/components/schemas/{model}")
    refs = {m: keys[(m, mode)] for (m, mode) in keys}
    paths: dict[str, dict] = {}
    for op in OPERATIONS:
        answers = {**op.answers}
        if op.writes:
            answers |= {401: E, 403: E, 413: E, 415: E}
        elif op.path not in OPEN_PATHS:
            answers[401] = E  # reads need a token with CNSCHED_API_READ_NEEDS_TOKEN
        if op.path == "/tasks" and op.method == "post":
            answers[503] = E  # the queue is full (Retry-After)
        answers.setdefault(503, E)  # the request timeout (streams/web/guard.py)
        params = [{**x, "schema": {k: page_limit_max if v == PAGE_LIMIT_MAX else v for k, v in x["schema"].items()}}
                  for x in op.params]
        entry = {"summary": op.summary, "operationId": OPERATION_IDS[(op.path, op.method)], "parameters": params,
                 "responses": {str(s): _answer(s, a, refs) for s, a in sorted(answers.items())}}
        if op.body is not None:
            entry["requestBody"] = {"required": op.body_required, "content": {"application/json": {"schema": refs[op.body]}}}
        if op.writes:
            entry["security"] = [{"bearer": []}]
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": "cnsched worker API", "version": version,
                 "description": "Network awareness, compute metering, scheduling, forecasts, power and quotas. "
                                "Every error is answered with the JSON error body (ErrorBody): the statuses each "
                                "operation may answer are listed with it; 404 for a path not here and 405 for a "
                                "method a path does not take are in components.responses."},
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}),
                       "responses": {str(s): _answer(s, E, refs) for s in ERRORS},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def _answer(status: int, answer, refs: dict) -> dict:
    out: dict = {"description": REASONS.get(status, "")}
    if isinstance(answer, tuple):  # content types of files
        out["content"] = {t: {"schema": {"type": "string"}} for t in answer}
    elif answer == TEXT:
        out["content"] = {TEXT: {"schema": {"type": "string"}}}
    elif answer == HTML:
        out["content"] = {HTML: {"schema": {"type": "string"}}}
    elif answer == ANY_JSON:
        out["content"] = {"application/json": {"schema": {"type": "object"}}}
    else:
        out["content"] = {"application/json": {"schema": refs[answer]}}
    return out
