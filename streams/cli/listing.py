"""`cnsched tasks`, `cnsched nodes` and `cnsched describe task|node ID`: what `squeue`, `sinfo` and
`kubectl describe` give an operator, from the worker's API, with times as clock times and ages."""

from __future__ import annotations

import json
import time
import urllib.parse

from streams.cli.api import _answer, _api
from streams.cli.common import UsageError
from streams.config import Settings
from streams.render.human import span
from streams.render.tables import table

PAGE = 1000  # items asked per request (the API's default CNSCHED_PAGE_LIMIT_MAX)


def add_parsers(sub) -> None:
    t = sub.add_parser("tasks", help="list tasks: id, team, type, status, nodes, wait, reason, age")
    t.add_argument("--status", default=None, help="only this status (queued, held, placed, running, ...)")
    t.add_argument("--team", default=None, help="only this team's tasks")
    t.add_argument("--limit", type=int, default=100, help="newest first, at most this many (default 100)")
    n = sub.add_parser("nodes", help="list nodes: site, rack, class, cards booked/reported/free, state, report age")
    d = sub.add_parser("describe", help="one task or node in full: times, reasons, the decision's breakdown, history")
    d.add_argument("kind", choices=["task", "node"])
    d.add_argument("id")
    for p in (t, n, d):
        p.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
        p.add_argument("--json", action="store_true", help="the API's answer as JSON")


def _pages(args, settings: Settings, command: str, path: str, limit: int | None = None) -> tuple[list, int] | None:
    """(items, total) of a listed resource, page by page up to ``limit`` items (None: all)."""
    items: list = []
    sep = "&" if "?" in path else "?"
    while True:
        want = PAGE if limit is None else min(PAGE, limit - len(items))
        got = _answer(args, settings, command, "GET", f"{path}{sep}offset={len(items)}&limit={want}")
        if got is None:
            return None
        items += got["items"]
        if not got["items"] or len(items) >= got["total"] or (limit is not None and len(items) >= limit):
            return items, got["total"]


def task_row(rec: dict, now: float) -> tuple:
    t, est = rec["task"], rec.get("estimate") or {}
    submitted = t.get("submitted_at")
    started = (rec.get("running") or {}).get("placed_at")
    wait = (started - submitted) if started and submitted else (now - submitted if submitted and rec["status"] in (
        "queued", "held") else None)
    reason = est.get("reason") or ""
    if reason and est.get("basis"):
        reason = f"{reason}: {est['basis']}"
    last = (rec.get("history") or [{}])[-1]
    if not reason and rec["status"] == "rejected" and "rejected" in last:
        reason = f"{last['rejected'].get('field', '')}: {last['rejected'].get('detail', '')}"
    return (t["id"], t.get("team") or "-", t["type"], t.get("priority", 50), rec["status"],
            ",".join(rec.get("nodes") or []) or "-", span(wait), reason[:70] or "-",
            span(now - submitted) if submitted else "-")


def cmd_tasks(args, settings: Settings) -> int:
    if args.limit < 1:
        raise UsageError("tasks: --limit must be at least 1")
    query = {k: v for k, v in (("status", args.status), ("team", args.team)) if v is not None}
    got = _pages(args, settings, "tasks", "/tasks" + (f"?{urllib.parse.urlencode(query)}" if query else ""),
                 args.limit)
    if got is None:
        return 1
    items, total = got
    if args.json:
        print(json.dumps(items))
        return 0
    now = time.time()
    print(table(["ID", "TEAM", "TYPE", "PRIO", "STATUS", "NODES", "WAIT", "REASON", "AGE"],
                [task_row(r, now) for r in items]))
    if total > len(items):
        print(f"({len(items)} of {total} tasks; --limit for more)")
    return 0


def node_row(n: dict) -> tuple:
    r = n.get("report") or {}
    return (n["node"], r.get("zone") or r.get("region") or "-", r.get("rack") or "-", n.get("class") or "-",
            n.get("cards"), n.get("cards_booked"), n.get("cards_reported_free"), n.get("cards_free"),
            n.get("state") or ("up" if n.get("available") else "down"), span(n.get("age_s")),
            len(n.get("tasks") or []), (n.get("state_reason") or "-")[:70])


def cmd_nodes(args, settings: Settings) -> int:
    got = _pages(args, settings, "nodes", "/compute/nodes")
    if got is None:
        return 1
    items, _ = got
    if args.json:
        print(json.dumps(items))
        return 0
    print(table(["NODE", "SITE", "RACK", "CLASS", "CARDS", "BOOKED", "REPORTED_FREE", "FREE", "STATE", "REPORT_AGE",
                 "TASKS", "REASON"], [node_row(n) for n in items]))
    return 0


def cmd_describe(args, settings: Settings) -> int:
    from streams.render.describe import describe_node, describe_task

    quoted = urllib.parse.quote(args.id, safe="")
    if args.kind == "task":
        rec = _answer(args, settings, "describe", "GET", f"/tasks/{quoted}")
        if rec is None:
            return 1
        print(json.dumps(rec) if args.json else describe_task(rec, time.time()))
        return 0
    node = _answer(args, settings, "describe", "GET", f"/compute/nodes/{quoted}")
    if node is None:
        return 1
    net = None if args.json else _network(args, settings, quoted)
    print(json.dumps(node) if args.json else describe_node(node, net, time.time()))
    return 0


def _network(args, settings: Settings, quoted: str) -> dict | None:
    """The node's network summary, or None (a node nobody probes has none: not an error here)."""
    from streams.client import call

    try:
        status, body = call(_api(args, settings), "GET", f"/network/nodes/{quoted}")
    except OSError:
        return None
    return body if status == 200 else None


COMMANDS = {"tasks": cmd_tasks, "nodes": cmd_nodes, "describe": cmd_describe}
