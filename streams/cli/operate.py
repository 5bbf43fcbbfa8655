"""`cnsched cancel|hold|release|priority` and `cnsched cordon|drain|uncordon`: an operator's commands
on tasks and nodes, through the worker's API (DELETE /tasks/{id}, POST /tasks/{id}/hold|release|
priority, POST /nodes/{node}/cordon|drain|uncordon). One line per task or node; an error prints one
line and exits 1."""

from __future__ import annotations

import json
import urllib.parse

from streams.cli.api import _answer
from streams.cli.common import Parser, UsageError
from streams.config import Settings

HELP = {"cancel": "cancel tasks: queued ones end; placed or running ones are stopped by their runner",
        "hold": "hold queued tasks: not placed until released",
        "release": "release held tasks: they queue again",
        "priority": "set a task's priority (0..100): its queue order and what it may preempt",
        "delete": "delete ended tasks (finished, failed, expired, cancelled, rejected) from the live view; "
                  "their history stays in DuckDB"}


NODE_HELP = {"cordon": "cordon nodes: no new placements; their work stays",
             "drain": "drain nodes: no new placements; their work moves at its next checkpoint (by --deadline)",
             "uncordon": "uncordon nodes: they take work again"}


def add_parsers(sub) -> None:
    for name, helptext in NODE_HELP.items():
        p = sub.add_parser(name, help=helptext)
        p.add_argument("node", nargs="+")
        if name == "drain":
            p.add_argument("--deadline", default=None,
                           help="how long work may wait for a checkpoint, with a unit: 30s, 30min, 2h "
                                "(a bare number is refused: Slurm reads it as minutes; default CNSCHED_DRAIN_DEADLINE_SECONDS)")
        p.add_argument("--reason", default=None, help="why (kept in the audit: DuckDB node_maintenance)")
        p.add_argument("--by", default=None, help="who asks (default: the API token's name; another only for a token with act_for_others)")
        p.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
        p.add_argument("--json", action="store_true", help="the API's answers as JSON lines")
    _task_parsers(sub)
    nd = sub.add_parser("node", help="node commands: remove (take nodes out of the inventory)")
    nsub = nd.add_subparsers(dest="node_action", metavar="ACTION", parser_class=Parser, required=True)
    rm = nsub.add_parser("remove", help="take nodes out of the inventory: their incidents close as removed "
                                        "(a node agent that reports one again brings it back)")
    rm.add_argument("node", nargs="+")
    rm.add_argument("--reason", default=None, help="why (kept in the audit: DuckDB node_maintenance)")
    rm.add_argument("--by", default=None, help="who asks (default: the API token's name; another only for a token with act_for_others)")
    rm.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
    rm.add_argument("--json", action="store_true", help="the API's answers as JSON lines")


def _task_parsers(sub) -> None:
    for name, helptext in HELP.items():
        p = sub.add_parser(name, help=helptext)
        if name == "priority":
            p.add_argument("task_id")
            p.add_argument("priority", type=int, help="0..100")
        else:
            p.add_argument("task_id", nargs="+")
        p.add_argument("--reason", default=None, help="why (kept in the task's history and the audit)")
        p.add_argument("--by", default=None, help="who asks (default: the API token's name; another only for a token with act_for_others)")
        p.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
        p.add_argument("--json", action="store_true", help="the API's answers as JSON lines")


def _line(action: str, tid: str, rec: dict) -> str:
    status = rec.get("status", "?")
    if status == "accepted":
        return f"{tid}: {action} sent; not applied yet (see cnsched query task {tid})"
    if status == "deleted":
        return f"{tid} deleted (its history stays in DuckDB)"
    if action == "cancel" and rec.get("nodes"):
        return f"{tid} cancelled; its runner stops it on {','.join(rec['nodes'])} (cards held until it confirms)"
    if action == "priority":
        return f"{tid} priority {rec.get('task', {}).get('priority')} ({status})"
    return f"{tid} {status}"


def cmd_operate(args, settings: Settings) -> int:
    action = args.command
    ids = [args.task_id] if action == "priority" else args.task_id
    body = {k: v for k, v in (("reason", args.reason), ("by", args.by)) if v is not None}
    if action == "priority":
        body["priority"] = args.priority
    failed = 0
    for tid in ids:
        quoted = urllib.parse.quote(tid, safe="")
        method, path = ("DELETE", f"/tasks/{quoted}") if action == "cancel" else ("POST", f"/tasks/{quoted}/{action}")
        rec = _answer(args, settings, f"{action} {tid}", method, path, body)  # which target failed, named
        if rec is None:
            failed += 1
            continue
        print(json.dumps(rec) if args.json else _line(action, tid, rec))
    return 1 if failed else 0


def cmd_node(args, settings: Settings) -> int:
    from schemas.units import parse_duration

    action = args.node_action if args.command == "node" else args.command
    body = {k: v for k, v in (("reason", args.reason), ("by", args.by)) if v is not None}
    if getattr(args, "deadline", None) is not None:
        try:
            body["deadline_s"] = parse_duration(args.deadline, unit_required=True)
        except ValueError as exc:
            raise UsageError(f"drain: --deadline {exc}") from None
    failed = 0
    for node in args.node:
        got = _answer(args, settings, f"{action} {node}", "POST", f"/nodes/{urllib.parse.quote(node, safe='')}/{action}",
                      body)
        if got is None:
            failed += 1
            continue
        if args.json:
            print(json.dumps(got))
        elif got.get("status") == "accepted":
            print(f"{node}: {action} sent; not applied yet (see cnsched describe node {node})")
        elif got.get("status") == "removed":
            print(f"{node} removed")
        else:
            tasks = got.get("tasks") or []
            print(f"{node} {got.get('state')}" + (f"; its work ({', '.join(tasks)}) moves at its next checkpoint"
                                                 if got.get("state") == "draining" and tasks else ""))
    return 1 if failed else 0


COMMANDS = {name: cmd_operate for name in HELP} | {name: cmd_node for name in (*NODE_HELP, "node")}
