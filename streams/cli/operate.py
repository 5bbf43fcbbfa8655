"""`cnsched cancel|hold|release|priority`: an operator's commands on tasks, through the worker's API
(DELETE /tasks/{id}, POST /tasks/{id}/hold|release|priority). One line per task; an error prints
one line and exits 1."""

from __future__ import annotations

import json
import urllib.parse

from streams.cli.api import _answer
from streams.config import Settings

HELP = {"cancel": "cancel tasks: queued ones end; placed or running ones are stopped by their runner",
        "hold": "hold queued tasks: not placed until released",
        "release": "release held tasks: they queue again",
        "priority": "set a task's priority (0..100): its queue order and what it may preempt"}


def add_parsers(sub) -> None:
    for name, helptext in HELP.items():
        p = sub.add_parser(name, help=helptext)
        if name == "priority":
            p.add_argument("task_id")
            p.add_argument("priority", type=int, help="0..100")
        else:
            p.add_argument("task_id", nargs="+")
        p.add_argument("--reason", default=None, help="why (kept in the task's history and the audit)")
        p.add_argument("--by", default=None, help="who asks (default: the API says 'api')")
        p.add_argument("--url", default=None, help="the worker's API (default from CNSCHED_WEB_HOST/PORT)")
        p.add_argument("--json", action="store_true", help="the API's answers as JSON lines")


def _line(action: str, tid: str, rec: dict) -> str:
    status = rec.get("status", "?")
    if status == "accepted":
        return f"{tid}: {action} sent; not applied yet (see cnsched query task {tid})"
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
        rec = _answer(args, settings, action, method, path, body)
        if rec is None:
            failed += 1
            continue
        print(json.dumps(rec) if args.json else _line(action, tid, rec))
    return 1 if failed else 0


COMMANDS = {name: cmd_operate for name in HELP}
