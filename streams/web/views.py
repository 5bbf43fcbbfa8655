"""HTTP API of the worker (Faust web).

Network and compute reads are routed to the worker that owns the single-partition state tables
(`@app.table_route`), so they answer the same from any worker. Unknown ids: 404 with a JSON error;
malformed ids or paging parameters: 400 with the field and the reason.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time

import faust
from faust.web import Request, Response, View
from pydantic import ValidationError

from core.battery import BatteryInputError
from schemas.compute import NODE_ID_PATTERN
from schemas.sched import Task
from schemas.units import divides_day, parse_duration
from streams.adapters.inventory import scored
from streams.adapters.network import node_answer, path_answer
from streams.analytics.history import STATS, NotEnoughHistory, StoreError, forecast_path
from streams.analytics.power import TooFewSamples, size_site, window_samples
from streams.client import base_url
from streams.config import Settings
from streams.metrics import Counters
from streams.worker.deadletter import field_errors
from streams.worker.scheduling.agent import TaskBook
from streams.worker.state_tables import Inventory, NetState

_ID = re.compile(NODE_ID_PATTERN)
_ROUTE_KEY = "state"  # any key: the state tables have one partition


def _field_error(field: str, value: str, reason: str) -> dict:
    return {"error": "invalid request", "fields": [{"field": field, "value": value, "reason": reason}]}


def _check_ids(**ids: str) -> dict | None:
    for name, value in ids.items():
        if not _ID.match(value):
            return _field_error(name, value, f"must match {NODE_ID_PATTERN}")
    return None


def _paging(request: Request, limit_max: int) -> tuple[int, int] | dict:
    fields = []
    values = {}
    for name, default, lo, hi in (("offset", 0, 0, 10**9), ("limit", 100, 1, limit_max)):
        raw = request.query.get(name, str(default))
        try:
            v = int(raw)
        except ValueError:
            fields.append({"field": name, "value": raw, "reason": "must be an integer"})
            continue
        if not lo <= v <= hi:
            fields.append({"field": name, "value": raw, "reason": f"must be in [{lo}, {hi}]"})
        values[name] = v
    if fields:
        return {"error": "invalid request", "fields": fields}
    return values["offset"], values["limit"]


def register(app: faust.App, counters: Counters, settings: Settings, net: NetState, inv: Inventory,
             tasks: TaskBook, tasks_topic) -> None:
    conversion = settings.conversion_table
    bench_work = settings.benchmark_table

    known_metadata: set[str] = set()

    def state_route(table):
        """``app.table_route`` for a state table, after making sure the producer knows the table's
        changelog topic (Faust hashes the key with the producer's metadata and fails without it)."""
        routed = app.table_route(table=table, exact_key=_ROUTE_KEY)

        def decorate(fun):
            inner = routed(fun)

            @functools.wraps(fun)
            async def get(view, request, *args, **kwargs):
                name = table.changelog_topic.get_topic_name()
                if name not in known_metadata:
                    await app.producer._ensure_producer().partitions_for(name)  # aiokafka: fetches metadata
                    known_metadata.add(name)
                return await inner(view, request, *args, **kwargs)

            return get

        return decorate

    def paged(view: View, request: Request, items: list, render) -> Response:
        """One page of ``items`` (rendered), or 400 for bad paging parameters."""
        page = _paging(request, settings.page_limit_max)
        if isinstance(page, dict):
            return view.json(page, status=400)
        offset, limit = page
        return view.json({"items": [render(i) for i in items[offset:offset + limit]], "total": len(items),
                          "offset": offset, "limit": limit})

    def network_index():
        recs = net.records()
        local = {r["src"]: r for r in recs if r["dst"] == ""}
        by_src: dict[str, list[dict]] = {}
        for r in recs:
            if r["dst"]:
                by_src.setdefault(r["src"], []).append(r)
        return local, by_src

    @app.page("/metrics")
    class Metrics(View):
        async def get(self, request: Request) -> Response:
            return self.text(counters.exposition(), content_type="text/plain; version=0.0.4")

    @app.page("/health")
    class Health(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok", "app": app.conf.id})

    @app.page("/network/nodes/{node}")
    class NetworkNode(View):
        @state_route(net.table)
        async def get(self, request: Request, node: str) -> Response:
            if err := _check_ids(node=node):
                return self.json(err, status=400)
            local, by_src = network_index()
            if node not in local and node not in by_src:
                return self.json({"error": "unknown node", "node": node}, status=404)
            return self.json(node_answer(node, local.get(node), by_src.get(node, []), local, time.time()))

    @app.page("/network/nodes")
    class NetworkNodes(View):
        @state_route(net.table)
        async def get(self, request: Request) -> Response:
            local, by_src = network_index()
            now = time.time()
            return paged(self, request, sorted(set(local) | set(by_src)),
                         lambda n: node_answer(n, local.get(n), by_src.get(n, []), local, now))

    @app.page("/network/paths/{src}/{dst}")
    class NetworkPath(View):
        @state_route(net.table)
        async def get(self, request: Request, src: str, dst: str) -> Response:
            if err := _check_ids(src=src, dst=dst):
                return self.json(err, status=400)
            path = net.get(src, dst)
            if path is None:
                return self.json({"error": "unknown path", "src": src, "dst": dst}, status=404)
            local, _ = network_index()
            return self.json(path_answer(path, local, time.time()))

    @app.page("/network/paths")
    class NetworkPaths(View):
        @state_route(net.table)
        async def get(self, request: Request) -> Response:
            src = request.query.get("src")
            if src is not None and (err := _check_ids(src=src)):
                return self.json(err, status=400)
            local, by_src = network_index()
            paths = sorted((p for ps in by_src.values() for p in ps if src is None or p["src"] == src),
                           key=lambda p: (p["src"], p["dst"]))
            now = time.time()
            return paged(self, request, paths, lambda p: path_answer(p, local, now))

    def compute_view():
        return scored(inv.records(), conversion, bench_work, time.time(), settings.node_timeout_seconds)

    @app.page("/compute/nodes/{node}")
    class ComputeNode(View):
        @state_route(inv.table)
        async def get(self, request: Request, node: str) -> Response:
            if err := _check_ids(node=node):
                return self.json(err, status=400)
            for item in compute_view():
                if item["node"] == node:
                    return self.json(item)
            return self.json({"error": "unknown node", "node": node}, status=404)

    @app.page("/compute/nodes")
    class ComputeNodes(View):
        @state_route(inv.table)
        async def get(self, request: Request) -> Response:
            return paged(self, request, compute_view(), lambda item: item)

    async def forecast_answer(view: View, request: Request, src: str, dst: str) -> Response:
        """The series' statistic for the next ``horizon`` at ``step`` resolution, from its history in
        DuckDB: 409 with how much history is needed when there is too little."""
        q = forecast_query(request)
        if "error" in q:
            return view.json(q, status=400)
        try:
            out = await asyncio.to_thread(forecast_path, settings.duckdb_path, src, dst, q["metric"], q["stat"],
                                          q["step_s"], q["horizon_steps"])
        except NotEnoughHistory as exc:
            return view.json({"error": "not enough history", "detail": str(exc), "needed_steps": exc.needed_steps,
                              "have_steps": exc.have_steps, "step_s": exc.step_s,
                              "needed_seconds": exc.needed_steps * exc.step_s}, status=409)
        except StoreError as exc:
            return view.json({"error": "history unavailable", "detail": str(exc)}, status=503)
        where = {"src": src, "dst": dst} if dst else {"node": src}
        return view.json({**where, "metric": q["metric"], "stat": q["stat"], "step_s": q["step_s"],
                          "horizon_s": q["horizon_steps"] * q["step_s"], **out})

    @app.page("/forecast/paths/{src}/{dst}")
    class ForecastPath(View):
        async def get(self, request: Request, src: str, dst: str) -> Response:
            if err := _check_ids(src=src, dst=dst):
                return self.json(err, status=400)
            return await forecast_answer(self, request, src, dst)

    @app.page("/forecast/nodes/{node}")
    class ForecastNode(View):
        async def get(self, request: Request, node: str) -> Response:
            """A node-local metric (bw_util, retrans_rate, power_mw, ...): the series with dst ''."""
            if err := _check_ids(node=node):
                return self.json(err, status=400)
            return await forecast_answer(self, request, node, "")

    def durations(request: Request, fields: list, **defaults: str) -> dict:
        """The named duration parameters in seconds; a malformed one adds a field error instead."""
        out = {}
        for name, default in defaults.items():
            raw = request.query.get(name, default)
            try:
                out[name] = parse_duration(raw)
            except ValueError as exc:
                fields.append({"field": name, "value": raw, "reason": str(exc)})
        return out

    def forecast_query(request: Request) -> dict:
        fields: list = []
        metric = request.query.get("metric", "rtt_ms")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", metric):
            fields.append({"field": "metric", "value": metric, "reason": "must be a metric name"})
        stat = request.query.get("stat", "mean")
        if stat not in STATS:
            fields.append({"field": "stat", "value": stat, "reason": f"must be one of {', '.join(STATS)}"})
        out = durations(request, fields, step=f"{settings.forecast_step_seconds:g}s", horizon="60m")
        if "step" in out and not (out["step"] >= 1 and divides_day(out["step"])):
            fields.append({"field": "step", "value": request.query.get("step"),
                           "reason": "must be 1 s to 1 d and divide a day (e.g. 60s, 5min, 1h)"})
            out.pop("step")
        if "step" in out and "horizon" in out:
            steps = out["horizon"] / out["step"]
            if steps < 1 or steps > 10_080 or abs(steps - round(steps)) > 1e-9:
                fields.append({"field": "horizon", "value": request.query.get("horizon", "60m"),
                               "reason": "must be a whole number (1 to 10080) of steps"})
        if fields:
            return {"error": "invalid request", "fields": fields}
        return {"metric": metric, "stat": stat, "step_s": out["step"], "horizon_steps": int(round(steps))}

    @app.page("/power/{site}/smoothing")
    class PowerSmoothing(View):
        async def get(self, request: Request, site: str) -> Response:
            """Battery sizing from the site's stored power_mw windows (DuckDB) over ``period``."""
            if err := _check_ids(site=site):
                return self.json(err, status=400)
            q = smoothing_query(request)
            if "error" in q:
                return self.json(q, status=400)
            try:
                out = await asyncio.to_thread(size_site, settings.duckdb_path, site, q)
            except TooFewSamples as exc:
                return self.json({"error": "not enough history", "detail": str(exc), "have_samples": exc.have,
                                  "needed_samples": exc.needed}, status=409)
            except StoreError as exc:
                return self.json({"error": "history unavailable", "detail": str(exc)}, status=503)
            if out is None:
                return self.json({"error": "no power_mw history for this site", "site": site}, status=404)
            return self.json(out)

    def smoothing_query(request: Request) -> dict:
        fields: list = []
        out = durations(request, fields, interval="1min", period="1d")
        raw_window = request.query.get("window", "15min")
        if "interval" in out:
            try:
                out["window"] = window_samples(raw_window, out["interval"])
            except BatteryInputError as exc:
                fields.append({"field": "window", "value": raw_window, "reason": str(exc)})
        for name, default, ok, reason in (("margin", "1.2", lambda v: v > 0, "must be > 0"),
                                          ("dod", "0.9", lambda v: 0 < v <= 1, "must be in (0, 1]"),
                                          ("ramp_limit", None, lambda v: v > 0, "must be > 0 MW/min")):
            raw = request.query.get(name, default)
            if raw is None:
                out[name] = None
                continue
            try:
                v = float(raw)
            except ValueError:
                v = float("nan")
            if not (v == v and abs(v) != float("inf") and ok(v)):
                fields.append({"field": name, "value": raw, "reason": reason})
            out[name] = v
        trailing = request.query.get("trailing", "false").lower()
        if trailing not in ("true", "false", "1", "0"):
            fields.append({"field": "trailing", "value": trailing, "reason": "must be true or false"})
        out["trailing"] = trailing in ("true", "1")
        if fields:
            return {"error": "invalid request", "fields": fields}
        return out

    @app.page("/tasks/{task_id}")
    class TaskView(View):
        @state_route(tasks.table)
        async def get(self, request: Request, task_id: str) -> Response:
            if err := _check_ids(task_id=task_id):
                return self.json(err, status=400)
            rec = tasks.get(task_id)
            if rec is None:
                return self.json({"error": "unknown task", "task_id": task_id}, status=404)
            return self.json(rec)

    @app.page("/tasks")
    class Tasks(View):
        async def post(self, request: Request) -> Response:
            """Submit a task: 422 with field errors, else the decision once it is made."""
            try:
                body = await request.json()
            except ValueError:
                return self.json({"error": "invalid task", "fields": [{"field": "body", "reason": "not JSON"}]},
                                 status=422)
            try:
                task = Task.model_validate(body)
            except ValidationError as exc:
                return self.json({"error": "invalid task", "fields": field_errors(exc)}, status=422)
            if task.submitted_at is None:
                task = task.model_copy(update={"submitted_at": time.time()})
            known = len((await _task_record(task.id) or {}).get("history", []))
            await tasks_topic.send(key=task.id.encode(), value=task.model_dump_json().encode())
            deadline = time.monotonic() + settings.decision_timeout_seconds
            while time.monotonic() < deadline:
                rec = await _task_record(task.id)
                if rec is not None and len(rec.get("history", [])) > known:
                    return self.json({"task_id": task.id, "status": rec["status"], "nodes": rec["nodes"],
                                      "decision": rec["history"][-1].get("decision")})
                await asyncio.sleep(0.05)
            return self.json({"task_id": task.id, "status": "accepted",
                              "detail": "no decision yet; see GET /tasks/" + task.id}, status=202)

    async def _task_record(task_id: str) -> dict | None:
        """The task's record from whichever worker owns the tasks table."""
        url = f"{base_url(settings.web_host, settings.web_port)}/tasks/{task_id}"
        try:
            async with app.http_client.get(url) as resp:
                return await resp.json() if resp.status == 200 else None
        except Exception:  # the owner is rebalancing: try again
            return None
