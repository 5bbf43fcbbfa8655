"""Per-node and per-path series on /metrics, from the scheduler's read-only view: what an operator
alerts on (a node down, a path degraded, cards booked against reported). Label sets are bounded: at
most CNSCHED_METRICS_NODES_MAX nodes and CNSCHED_METRICS_PATHS_MAX paths; what is left out is counted
(``metrics_series_dropped``). Series of nodes and paths that are gone disappear."""

from __future__ import annotations

import math
import time

from streams.metrics import Counters
from streams.worker.scheduling.view import SchedulerView

METRICS = {
    "node_up": "1 while the node is up (0: down: failed, silent or reported down; cordoned and draining are up)",
    "node_schedulable": "1 while the node takes new work (up, not cordoned or draining)",
    "node_cards": "the node's cards",
    "node_cards_booked": "cards cnsched has booked on the node",
    "node_cards_free": "cards cnsched would give out on the node now",
    "node_cards_reported_free": "free cards in the node's own last report (absent: it reports none)",
    "path_quality": "a measured path's quality, 0..100, balanced profile, aged (absent: unknown)",
    "path_rtt_p95_ms": "a measured path's p95 round-trip time in its latest window",
    "path_loss_ratio": "a measured path's loss in its latest window, 0..1",
    "metrics_series_dropped": "nodes or paths left out of the per-node or per-path series by the caps",
}


def describe(counters: Counters) -> None:
    for name, help_text in METRICS.items():
        counters.describe(name, help_text)


def publish(counters: Counters, view: SchedulerView, now: float, nodes_max: int, paths_max: int) -> None:
    books = view.node_books(now)
    shown = books[:nodes_max]
    node = ("node",)
    counters.replace("node_up", node, [((b.node,), float(b.state != "down")) for b in shown])
    counters.replace("node_schedulable", node, [((b.node,), float(b.state == "up")) for b in shown])
    counters.replace("node_cards", node, [((b.node,), b.cards) for b in shown])
    counters.replace("node_cards_booked", node, [((b.node,), b.booked) for b in shown])
    counters.replace("node_cards_free", node, [((b.node,), b.free) for b in shown])
    counters.replace("node_cards_reported_free", node,
                     [((b.node,), b.reported_free) for b in shown if b.reported_free is not None])
    paths, left_out = view.path_states(now, paths_max)
    pair = ("src", "dst")
    counters.replace("path_quality", pair, [((a, b), q) for a, b, q, _, _ in paths if not math.isnan(q)])
    counters.replace("path_rtt_p95_ms", pair, [((a, b), p) for a, b, _, p, _ in paths if not math.isnan(p)])
    counters.replace("path_loss_ratio", pair, [((a, b), x) for a, b, _, _, x in paths if not math.isnan(x)])
    counters.set("metrics_series_dropped", len(books) - len(shown), kind="node")
    counters.set("metrics_series_dropped", left_out, kind="path")


def clear(counters: Counters) -> None:
    """No per-node or per-path series (this worker no longer runs the scheduler)."""
    for name in METRICS:
        if name != "metrics_series_dropped":
            counters.replace(name, ("src", "dst") if name.startswith("path_") else ("node",), [])


NO_QUOTA = "(no quota)"  # the team label of tasks whose team the quota set does not name


def quotas(counters: Counters, sched) -> None:
    """Each team's cards of any class against its quota, and its queued tasks (with quotas set); the
    queued tasks of teams the set does not name under ``(no quota)``, so that the teams add up to the queue."""
    book = sched.quotas
    if not book.active:
        return
    nodes = sched.nodes(time.time())
    g, _ = book.arrays(nodes.class_names)
    use = book.use(list(sched.running.values()), nodes.index, nodes.node_class, len(nodes.class_names)).use
    queued = [book.team_of(p.task) for p in sched.pending.values()]
    for t, team in enumerate(book.teams):
        counters.set("quota_used_cards", use[t, -1], team=team)
        counters.set("quota_guaranteed_cards", g[t, -1], team=team)
        counters.set("quota_borrowed_cards", max(use[t, -1] - g[t, -1], 0.0), team=team)
        counters.set("queued_tasks", sum(q == t for q in queued), team=team)
    counters.set("queued_tasks", sum(q is None for q in queued), team=NO_QUOTA)
