"""The worker's HTTP API (Faust web): one route table, one view class per resource.

Network, compute and task reads are routed to the worker that owns the single-partition state table
they read (`@app.table_route`), so any worker answers them the same. Unknown ids: 404 with a JSON
error; malformed ids or parameters: 400 with every field and the reason; an invalid task: 422.
"""

from __future__ import annotations

import faust

from streams.config import Settings
from streams.metrics import Counters
from streams.web import compute, dashboard, forecast, network, ops, power, quotas, tasks
from streams.web.base import Resource, WebContext

ROUTES: tuple[tuple[str, type[Resource]], ...] = (
    ("/metrics", ops.Metrics),
    ("/health", ops.HealthView),
    ("/health/ready", ops.HealthView),
    ("/health/live", ops.LiveView),
    ("/openapi.json", ops.OpenApi),
    ("/ui", dashboard.Page),
    ("/ui/{name}", dashboard.Asset),
    ("/network/nodes/{node}", network.NetworkNode),
    ("/network/nodes", network.NetworkNodes),
    ("/network/paths/{src}/{dst}", network.NetworkPath),
    ("/network/paths", network.NetworkPaths),
    ("/compute/nodes/{node}", compute.ComputeNode),
    ("/compute/nodes", compute.ComputeNodes),
    ("/forecast/paths/{src}/{dst}", forecast.ForecastPath),
    ("/forecast/nodes/{node}", forecast.ForecastNode),
    ("/power/{site}/smoothing", power.PowerSmoothing),
    ("/tasks/{task_id}", tasks.TaskView),
    *((f"/tasks/{{task_id}}/{a}", tasks.task_command_view(a)) for a in ("hold", "release", "priority", "delete")),
    *((f"/nodes/{{node}}/{a}", compute.node_command_view(a)) for a in compute.ACTIONS),
    ("/tasks", tasks.Tasks),
    ("/quotas", quotas.Quotas),
    ("/incidents", tasks.Incidents),
    ("/services/{service_id}/routes", tasks.ServiceRoutes),
    ("/summary", tasks.Summary),
)


def register(app: faust.App, counters: Counters, settings: Settings, net, inv, book, tasks_topic,
             readiness=None, quotas=None, quotas_topic=None, scheduler=None, events_topic=None,
             maintenance_topic=None) -> WebContext:
    ctx = WebContext(app, counters, settings, net, inv, book, tasks_topic, readiness, quotas, quotas_topic,
                     scheduler, events_topic, maintenance_topic)
    for path, view in ROUTES:
        attrs: dict = {"ctx": ctx}
        if view.routed is not None and getattr(ctx, view.routed) is not None:
            attrs["get"] = ctx.state_route(getattr(ctx, view.routed).table)(view.get)
        app.page(path)(type(view.__name__, (view,), attrs))
    return ctx
