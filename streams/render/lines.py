"""One line per event for a terminal: window results, dead letters, decisions and migrations (the
JSON documents of their topics and of POST /tasks in, text out)."""

from __future__ import annotations

import time


def _fmt(v) -> str:
    return "   -   " if v is None else f"{v:7.2f}"


def _num(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def window_line(doc: dict) -> str:
    t = time.strftime("%H:%M:%S", time.localtime(doc["window_start"]))
    return (f"window   {t} {doc['src']:>9} -> {doc['dst']:<9} {doc['metric']} "
            f"n={doc['count']:<5} lost={doc['lost']:<3} outl={doc['outliers']:<3} "
            f"mean={_fmt(doc['mean'])} p50={_fmt(doc['p50'])} p95={_fmt(doc['p95'])} p99={_fmt(doc['p99'])}")


def reschedule_line(doc: dict) -> str:
    return (f"resched  {doc['task_id']} {','.join(doc['from_nodes'])} -> {','.join(doc['to_nodes'])} "
            f"({doc['trigger']}): expected gain {doc['expected_gain_s']:.0f} s > migration cost "
            f"{doc['migration_cost_s']:.0f} s; composite {_num(doc['before']['composite'])} -> "
            f"{_num(doc['after']['composite'])}")


def deadletter_line(doc: dict) -> str:
    return f"deadltr  {doc['reason']:<12} {doc['detail'][:80]}"


def decision_line(task_id: str, answer: dict) -> str:
    """A POST /tasks answer: where the task went and why, or why it could not be placed."""
    d = answer.get("decision") or {}
    if d.get("status") == "scaled":
        return scaling_line(d)
    if answer.get("status") == "placed":
        cands = " | ".join(f"{c['node']} {c['composite']:.1f}" for c in d["candidates"][:3])
        return (f"decision {task_id} -> {','.join(answer['nodes'])} (alpha {d['alpha']:.2f}, {d['network_profile']} "
                f"profile); best: {cands}; compute-only would pick {','.join(d['compute_only_nodes'])}")
    counts = ", ".join(f"{k} x{v}" for k, v in (d.get("rejected_counts") or {}).items())
    return f"decision {task_id} {d.get('status', answer.get('status'))}: {counts}"


def scaling_line(d: dict) -> str:
    """A scaled service's decision (sched.decisions): how many replicas, why, and what changed."""
    c = d["scaling"]
    load = [f"load {c['utilisation']:.2f} of the serving replicas" if c.get("utilisation") is not None else "",
            f"{c['request_rate']:g} req/s" if c.get("request_rate") is not None else "",
            f"forecast {c['forecast_rate']:.0f} req/s" if c.get("forecast_rate") is not None else ""]
    load_text = ", ".join(x for x in load if x)
    changes = [f"{k} {','.join(c[k])}" for k in ("promoted", "added", "removed") if c.get(k)]
    return (f"scaling  {d['task_id']}: {c['from_replicas']} -> {c['to_replicas']} replicas, reason {c['reason']}"
            f"{' (' + load_text + ')' if load_text else ''}; {'; '.join(changes) or 'no replica changed'}; "
            f"serving on {','.join(d['nodes']) or 'none yet'}")


def energy_decision_line(d: dict) -> str:
    """A placed cost-sensitive decision (sched.decisions): the energy score of the chosen node."""
    c = next(c for c in d["candidates"] if c["node"] in d["nodes"])
    return (f"decision {d['task_id']} ({d['task_type']}, cost sensitivity {d['cost_sensitivity']:g}) -> "
            f"{','.join(d['nodes'])}: energy score {c['energy_score']:.0f}, composite {c['composite']:.1f}; "
            f"compute-only would pick {','.join(d['compute_only_nodes'])}")


def incident_line(doc: dict, since: float | None = None) -> str:
    """A sched.incidents message; ``since``: when the failure began, if known (the detection delay)."""
    tasks = ",".join(doc["tasks"]) or "none"
    if doc["status"] == "open":
        delay = "" if since is None else f" {doc['detected_at'] - since:.1f} s after its reports stopped,"
        return f"incident {doc['node']} failed: detected{delay} cause {doc['cause']}; tasks on it: {tasks}"
    if doc["status"] == "mitigated":
        outcomes = "; ".join(f"{t} {o}" for t, o in (doc.get("outcomes") or {}).items()) or f"tasks {tasks} elsewhere"
        return (f"incident {doc['node']} mitigated {doc['mitigated_at'] - doc['detected_at']:.1f} s after detection "
                f"({outcomes}; work lost {doc['work_lost_s']:.0f} s of task time); open until the node is back")
    return (f"incident {doc['node']} recovered {doc['recovered_at'] - doc['detected_at']:.1f} s after detection "
            f"({doc.get('resolution') or 'node back'})")
