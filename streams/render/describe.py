"""`cnsched describe task|node`: one record as an operator reads it (as `kubectl describe` does):
fields with clock times and ages, what a queued task waits for, the latest decision's breakdown, and
the history newest last."""

from __future__ import annotations

from streams.render.human import rejections, span, when
from streams.render.tables import table


def _fields(pairs: list[tuple[str, object]]) -> list[str]:
    width = max(len(k) for k, _ in pairs) + 2
    return [f"{k + ':':<{width}}{v}" for k, v in pairs]


def _history_lines(h: dict) -> list[tuple]:
    """One history entry's lines: an operator's command and the decision it caused are one entry."""
    if "event" in h and "decision" in h:
        return [_history_line({"event": h["event"]}), _history_line({"decision": h["decision"]})]
    return [_history_line(h)]


def _history_line(h: dict) -> tuple:
    if "decision" in h:
        d = h["decision"]
        what = d["status"] + (f" on {','.join(d['nodes'])}" if d.get("nodes") else "")
        why = "; ".join(f["reason"] for f in d.get("fallbacks") or [])
        return when(d.get("decided_at")), "decision", what + (f" ({why})" if why else "")
    if "reschedule" in h:
        r = h["reschedule"]
        return (when(r.get("at")), "move", f"{','.join(r['from_nodes'])} -> {','.join(r['to_nodes'])} "
                f"({r['trigger']}; gain {r['expected_gain_s']:.0f} s, cost {r['migration_cost_s']:.0f} s)")
    if "event" in h:
        e = h["event"]
        extra = [f"by {e['by']}" if e.get("by") else "", e.get("reason") or "",
                 f"priority {e['priority']}" if e.get("priority") is not None else "",
                 f"on {','.join(e['nodes'])}" if e.get("nodes") else ""]
        return when(e.get("at")), e["event"], "; ".join(x for x in extra if x) or "-"
    if "rejected" in h:
        r = h["rejected"]
        return "-", "rejected", f"{r.get('field', '')}: {r.get('detail', r.get('reason', ''))}"
    return "-", "?", str(h)[:80]


def describe_task(rec: dict, now: float) -> str:
    t, est = rec["task"], rec.get("estimate") or {}
    res = t.get("resources") or {}
    submitted = t.get("submitted_at")
    pairs = [("Task", t["id"]), ("Type", t["type"]), ("Team", t.get("team") or "(default)"),
             ("Priority", t.get("priority", 50)), ("Status", rec["status"]),
             ("Resources", f"{res.get('cards', 0)} cards x {t.get('peers', 1)} worker(s)"),
             ("Submitted", (f"{when(submitted)} ({span(now - submitted)} ago)" if submitted else "-")
              + (f" by {t['submitted_by']}" if t.get("submitted_by") else "")),
             ("Expected run", span(t.get("expected_duration_s"))),
             ("Nodes", ",".join(rec.get("nodes") or []) or "-")]
    run = rec.get("running") or {}
    if run.get("placed_at"):
        pairs.append(("Placed", f"{when(run['placed_at'])} (waited {span(run['placed_at'] - submitted)})"
                      if submitted else when(run["placed_at"])))
    if est.get("reason"):
        pairs.append(("Waiting for", f"{est['reason']}: {est['basis']}"))
        pairs.append(("Position", f"{est['position']} in the queue" if est.get("position") else "-"))
    if est.get("start") or est.get("end"):
        pairs.append(("Estimate", f"start {when(est.get('start'))}, end {when(est.get('end'))}"
                      + (f" on {','.join(est['reserved_nodes'])}" if est.get("reserved_nodes") else "")))
    lines = _fields(pairs)
    decisions = [h["decision"] for h in rec.get("history") or [] if "decision" in h]
    if decisions:
        d = decisions[-1]
        lines += ["", f"Latest decision ({when(d.get('decided_at'))}): {d['status']}, alpha {d.get('alpha', 0):.2f}, "
                      f"profile {d.get('network_profile', '-')}"]
        if d.get("rejected") or d.get("rejected_counts"):  # the nodes of each reason named, a few then a count
            lines.append("  Rejected: " + rejections(d))
        if d.get("candidates"):
            rows = [(c["node"], c["compute_score"], c["network_score"], c["composite"]) for c in d["candidates"][:5]]
            lines += ["  " + x for x in table(["NODE", "COMPUTE", "NETWORK", "COMPOSITE"], rows).splitlines()]
        if d.get("compute_only_nodes"):
            lines.append(f"  Compute-only choice: {','.join(d['compute_only_nodes'])}")
    history = [line for h in rec.get("history") or [] for line in _history_lines(h)]
    if history:
        lines += ["", "History:"] + ["  " + x for x in table(["AT", "WHAT", "DETAIL"], history).splitlines()]
    return "\n".join(lines)


def describe_node(node: dict, net: dict | None, now: float) -> str:
    r = node.get("report") or {}
    pairs = [("Node", node["node"]), ("State", node.get("state") or ("up" if node.get("available") else "down")),
             *([("Reason", node["state_reason"])] if node.get("state_reason") else []),
             ("Class", node.get("class")), ("Site", r.get("zone") or r.get("region") or "-"),
             ("Rack", r.get("rack") or "-"), ("Tier", r.get("tier") or "-"),
             ("Cards", f"{node.get('cards', r.get('cards'))} ({node.get('cards_booked', '-')} booked by cnsched, "
                       f"{'-' if node.get('cards_reported_free') is None else node['cards_reported_free']} free by "
                       f"its report, {node.get('cards_free', '-')} free to place)"),
             ("Tasks", ", ".join(node.get("tasks") or []) or "-"),
             ("Last report", f"{when(node.get('last_seen'))} ({span(node.get('age_s'))} ago)"),
             ("First seen", when(node.get("first_seen"))),
             ("Compute score", ", ".join(f"{k} {v:.1f}" for k, v in (node.get("compute_score") or {}).items()))]
    if net:
        q = net.get("mean_quality_to_peers")
        pairs.append(("Network", f"mean quality to {net.get('peers', 0)} peers "
                                 f"{'unknown' if q is None else f'{q:.1f}'}; NIC utilisation "
                                 f"{'-' if net.get('bw_util') is None else format(net['bw_util'], '.2f')}"))
    for w in node.get("warnings") or []:
        pairs.append(("Warning", w))
    return "\n".join(_fields(pairs))
