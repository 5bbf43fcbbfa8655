"""`cnsched submit` and `cnsched query`: the worker's HTTP API from the command line."""

from __future__ import annotations

import sys

from streams.cli.common import Parser, UsageError, drawing
from streams.config import Settings


def add_parsers(sub) -> None:
    sb = sub.add_parser("submit", help="submit tasks to a worker (POST /tasks) and print the decisions")
    sb.add_argument("file", help="a task as JSON: an object, an array of them, or JSON lines; - for stdin")
    sb.add_argument("--url", default=None, help="the worker's API (default http://CNSCHED_WEB_HOST:CNSCHED_WEB_PORT)")
    sb.add_argument("--json", action="store_true", help="the API's answers as a JSON array")

    qt = sub.add_parser("quotas", help="replace the team quotas (PUT /quotas) from a JSON file")
    qt.add_argument("file", help='{"quotas": [{"team", "accel_class", "guaranteed_cards", "max_cards"}]}; - for stdin')
    qt.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
    qt.add_argument("--json", action="store_true", help="compact JSON (default: indented)")
    qt.add_argument("--allow-unnamed-teams", action="store_true", help=(
        "apply even though live tasks belong to teams the set does not name (they then wait for ever)"))

    qy = sub.add_parser("query", help="ask a worker's API: node, path, compute, task, forecast, power, quotas")
    qsub = qy.add_subparsers(dest="what", metavar="WHAT", parser_class=Parser, required=True)
    for name, ids, helptext in (("node", ["node"], "network summary of a node"),
                                ("path", ["src", "dst"], "window statistics and quality of a path"),
                                ("compute", ["node"], "compute report and scores of a node"),
                                ("task", ["task_id"], "a task's status, nodes and history"),
                                ("forecast", ["src", "dst"], "forecast of a path's (or, with dst -, a node's) metric"),
                                ("power", ["site"], "battery sizing from a site's stored power"),
                                ("quotas", [], "the team quotas in force and each team's use")):
        qp = qsub.add_parser(name, help=helptext)
        for i in ids:
            qp.add_argument(i)
        if name == "forecast":
            qp.add_argument("--metric", default="rtt_ms")
            qp.add_argument("--stat", default="mean")
            qp.add_argument("--horizon", default="60m")
            qp.add_argument("--step", default=None)
            qp.add_argument("--history", default=None, help="also answer with this much of the past (e.g. 6h)")
            qp.add_argument("--plot", metavar="FILE.png", default=None,
                            help="draw the history (default 6h) and the forecast with its band")
        if name == "power":
            for opt, default in (("--window", "5min"), ("--interval", "1min"), ("--period", "1d"),
                                 ("--margin", None), ("--dod", None), ("--ramp-limit", None)):
                qp.add_argument(opt, default=default)
            qp.add_argument("--trailing", action="store_true")
        qp.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
        qp.add_argument("--json", action="store_true", help="compact JSON (default: indented)")



def _api(args, settings: Settings) -> str:
    from streams.client import base_url

    return with_scheme(args.url) if args.url else base_url(settings.web_host, settings.web_port)


def with_scheme(url: str) -> str:
    """``--url`` as given, ``http://`` in front when it names no scheme (``127.0.0.1:6066``); a scheme
    other than http or https is a usage error."""
    if "://" not in url:
        return "http://" + url
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r}: the worker's API is http:// or https://")
    return url


def cmd_submit(args, settings: Settings) -> int:
    import json
    from pathlib import Path

    from streams.client import call
    from streams.render.human import rejections

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    except OSError as exc:
        raise UsageError(f"submit: {args.file}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
        tasks = doc if isinstance(doc, list) else [doc]
    except ValueError:
        try:
            tasks = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise UsageError(f"submit: {args.file} is not JSON (an object, an array or JSON lines): {exc}") from None
    if not tasks:
        raise UsageError(f"submit: no task in {args.file}")
    url = _api(args, settings)
    answers, rejected = [], 0
    for task in tasks:
        try:
            status, body = call(url, "POST", "/tasks", task if isinstance(task, dict) else {"task": task})
        except OSError as exc:
            print(f"cnsched: submit: cannot reach the worker at {url}: {exc}", file=sys.stderr)
            return 1
        answers.append({"http_status": status, **body})
        tid = task.get("id", "?") if isinstance(task, dict) else "?"
        if status in (401, 403):  # every other task would be refused alike: stop here, saying what to set
            print(f"cnsched: submit: {tid}: {refusal(status, body)}", file=sys.stderr)
            return 1
        if status in (409, 422):  # invalid (422), or refused by the cluster as it is (409)
            rejected += 1
            fields = "; ".join(f"{f.get('field')}: {f.get('reason')}" for f in body.get("fields", [])) or \
                f"{body.get('error', '')}: {body.get('detail', '')}"
            line = f"{tid} rejected: {fields}"
        elif status >= 400:  # refused by the API itself (too large, too many, ...): not submitted
            rejected += 1
            line = f"{tid} rejected: {refusal(status, body)}"
        elif body.get("status") == "placed":
            d = body.get("decision") or {}
            top = next((c for c in d.get("candidates", []) if c["node"] in body["nodes"]), {})
            line = (f"{tid} placed on {','.join(body['nodes'])} (alpha {d.get('alpha', 0):.2f}, composite "
                    f"{top.get('composite', float('nan')):.1f}; compute-only: {','.join(d.get('compute_only_nodes', []))})")
        else:
            d = body.get("decision") or {}
            line = f"{tid} {body.get('status', status)}" + (f": {why}" if (why := rejections(d)) else "")
        if not args.json:
            print(line)
            if status < 400 and str(body.get("detail") or "").startswith("warning:"):
                print(f"cnsched: submit: {tid}: {body['detail']}", file=sys.stderr)
    if args.json:
        print(json.dumps(answers))
    return 1 if rejected else 0


def cmd_query(args, settings: Settings) -> int:
    import urllib.parse


    if args.what == "node":
        path = f"/network/nodes/{args.node}"
    elif args.what == "path":
        path = f"/network/paths/{args.src}/{args.dst}"
    elif args.what == "compute":
        path = f"/compute/nodes/{args.node}"
    elif args.what == "task":
        path = f"/tasks/{args.task_id}"
    elif args.what == "quotas":
        path = "/quotas"
    elif args.what == "forecast":
        params = {"metric": args.metric, "stat": args.stat, "horizon": args.horizon}
        if args.step:
            params["step"] = args.step
        if args.history or args.plot:
            params["history"] = args.history or "6h"
        where = f"nodes/{args.src}" if args.dst == "-" else f"paths/{args.src}/{args.dst}"
        path = f"/forecast/{where}?{urllib.parse.urlencode(params)}"
        if args.plot:
            return _plot_forecast(args, settings, path)
    else:
        params = {k: v for k, v in (("window", args.window), ("interval", args.interval), ("period", args.period),
                                    ("margin", args.margin), ("dod", args.dod), ("ramp_limit", args.ramp_limit))
                  if v is not None}
        if args.trailing:
            params["trailing"] = "true"
        path = f"/power/{args.site}/smoothing?{urllib.parse.urlencode(params)}"
    return _print_call(args, settings, "query", "GET", path)


def _answer(args, settings: Settings, command: str, method: str, path: str, body: dict | None = None) -> dict | None:
    """The API's JSON answer; None after printing one line saying why there is none."""
    from streams.client import call

    url = _api(args, settings)
    try:
        status, answer = call(url, method, path, body)
    except OSError as exc:
        print(f"cnsched: {command}: cannot reach the worker at {url}: {exc}", file=sys.stderr)
        return None
    if status >= 400:
        print(f"cnsched: {command}: {refusal(status, answer)}", file=sys.stderr)
        return None
    return answer


# what to do about a refusal the API itself makes (streams/web/guard.py), beside what it says
_FIX = {401: "set CNSCHED_API_TOKEN to a token the worker's CNSCHED_API_TOKENS names",
        403: "set CNSCHED_API_TOKEN to a token of scope write (CNSCHED_API_TOKENS on the worker)",
        413: "the API takes bodies of at most 1 MiB: send the tasks in smaller files",
        429: "too many requests: wait and send again (CNSCHED_API_TASK_RATE on the worker)"}


def refusal(status: int, answer: dict) -> str:
    """One line for an HTTP refusal: the status, the server's error and detail (or field errors), and
    the fix where the CLI knows it."""
    msg = str(answer.get("error") or answer.get("status") or "error")
    if answer.get("fields"):
        msg += ": " + "; ".join(f"{f.get('field')}: {f.get('reason')}" for f in answer["fields"])
    elif answer.get("detail"):
        msg += ": " + str(answer["detail"])
    elif answer.get("raw"):
        msg += ": " + str(answer["raw"]).strip()[:200]
    fix = _FIX.get(status)
    return f"HTTP {status}: {msg}" + (f" ({fix})" if fix else "")


def _print_call(args, settings: Settings, command: str, method: str, path: str, body: dict | None = None) -> int:
    """Call the API and print its JSON answer; an error prints one line and exits 1."""
    import json

    answer = _answer(args, settings, command, method, path, body)
    if answer is None:
        return 1
    print(json.dumps(answer) if args.json else json.dumps(answer, indent=2))
    return 0


def _plot_forecast(args, settings: Settings, path: str) -> int:
    """The forecast's history, p50 and band drawn to ``--plot`` (minutes from now); its file named."""
    import json
    import time

    import numpy as np

    from streams.render.charts import Band, line_chart

    f = _answer(args, settings, "query", "GET", path)
    if f is None:
        return 1
    now = time.time()
    hist, pts = f.get("history") or [], f["points"]
    x = np.array([p["t"] for p in hist] + [p["t"] for p in pts]) - now
    nan_h, nan_p = np.full(len(hist), np.nan), np.full(len(pts), np.nan)
    p50 = np.concatenate([nan_h, [p["value"] for p in pts]])
    upper = np.concatenate([nan_h, [p["upper"] if p.get("upper") is not None else np.nan for p in pts]])
    where = f"{f.get('src')} -> {f.get('dst')}" if f.get("dst") else f.get("node")
    with drawing("--plot", args.plot):
        line_chart(args.plot, [("history", np.concatenate([[p["value"] for p in hist], nan_p])), ("forecast (p50)", p50)],
                   band=Band(f"p50 to p{round(100 * (f.get('quantile') or 0.9))}", p50, upper), x=x / 60.0,
                   xlabel="minutes from now", ylabel=f"{f['metric']} {f['stat']}", title=f"forecast of {where}")
    out = {"plot": args.plot, "history_points": len(hist), "forecast_points": len(pts)}
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


def cmd_quotas(args, settings: Settings) -> int:
    import json
    from pathlib import Path

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        doc = json.loads(text)
    except OSError as exc:
        raise UsageError(f"quotas: {args.file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"quotas: {args.file} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UsageError(f'quotas: {args.file}: expected an object {{"quotas": [...]}}')
    if args.allow_unnamed_teams:
        doc["allow_unnamed_teams"] = True
    return _print_call(args, settings, "quotas", "PUT", "/quotas", doc)


COMMANDS = {"submit": cmd_submit, "query": cmd_query, "quotas": cmd_quotas}
