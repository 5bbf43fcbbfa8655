"""What the worker's API may read of the scheduler: answers built from its state, never the state
objects themselves (the web holds a :class:`SchedulerView`, not the Scheduler: it cannot place,
book or release anything)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from schemas.api import QueueRow, QuotaUsage, SummaryAnswer, TaskEstimate
from schemas.operations import Incident
from schemas.quota import ANY_CLASS, DEFAULT_TEAM
from schemas.routes import Routes
from streams.worker.scheduling.failures import open_incidents
from streams.worker.scheduling.queue import expected_end
from streams.worker.scheduling.routing import routes_for


@dataclass(frozen=True)
class NodeBooks:
    """A node as the scheduler holds it: its cards, what it reported free (None: no report of free
    cards), what cnsched booked there and for which tasks, what it would give out now, and its state
    (up; cordoned or draining by an operator; down: failed, silent or reported down)."""

    node: str
    cards: int
    reported_free: int | None
    booked: int
    free: int
    tasks: list[str]
    state: str
    reason: str = ""  # why it is down, cordoned or draining (who, when, deadline, the operator's reason)


class SchedulerView:
    """Read-only answers from a :class:`~streams.worker.scheduling.state.Scheduler`."""

    def __init__(self, sched) -> None:
        self._sched = sched

    def estimates(self, task_ids: list[str], now: float) -> dict[str, TaskEstimate]:
        """:meth:`estimate` of many tasks, the queue's order computed once (a listing)."""
        order = [t.id for t in self._sched.queue_order(now)] if self._sched.pending else []
        out = {t: self.estimate(t, now, order) for t in task_ids}
        return {t: e for t, e in out.items() if e is not None}

    def estimate(self, task_id: str, now: float, order: list[str] | None = None) -> TaskEstimate | None:
        """When a running task ends, or when the queue's head starts (its reservation), and what a
        queued task waits for; None for a task the scheduler does not hold."""
        s = self._sched
        run = s.running.get(task_id)
        if run is not None:
            return TaskEstimate(start=run.placed_at, end=expected_end(run, now),
                                basis="placed; ends when its expected_duration_s has run")
        why = s.waiting(task_id, now, order)
        if why is None:
            return None
        res = s.reservation
        if res is not None and res.task_id == task_id:
            return TaskEstimate(start=res.start, end=res.end, reserved_nodes=res.nodes, basis=why.detail,
                                reason=why.reason, position=why.position)
        return TaskEstimate(basis=why.detail, reason=why.reason, position=why.position)

    @property
    def version(self) -> int:
        """The scheduler's state version (grows with every change of its books or its inputs)."""
        return self._sched.version

    def node_books(self, now: float) -> list[NodeBooks]:
        """Every node of the inventory: booked beside reported (the two can disagree: work cnsched
        did not place, or a report older than a booking)."""
        s = self._sched
        nodes = s.nodes(now)
        booked = s.ledger.allocated(nodes.index, len(nodes.ids))
        on: dict[str, list[str]] = {}
        for tid in s.ledger.tasks():
            for n in s.ledger.nodes_of(tid):
                on.setdefault(n, []).append(tid)
        states = s.node_states(nodes, now)
        out = []
        for i, node in enumerate(nodes.ids):
            rep = float(nodes.reported_free[i, 0])
            out.append(NodeBooks(node, int(nodes.capacity[i, 0]), None if math.isnan(rep) else int(rep),
                                 int(round(booked[i, 0])), int(nodes.usable[i, 0]) if nodes.available[i] else 0,
                                 sorted(set(on.get(node, []))), *states[i]))
        return out

    def path_states(self, now: float, limit: int) -> tuple[list[tuple[str, str, float, float, float]], int]:
        """((src, dst, quality, p95 rtt ms, loss) of at most ``limit`` measured paths, how many were left
        out): the paths touching a node that holds tasks first, then the worst by quality (what an
        operator alerts on). Quality is the balanced profile's, aged as the scheduler scores it (NaN:
        unknown)."""
        s = self._sched
        nodes = s.nodes(now)
        table = s.path_table(nodes, "balanced")
        cols, rows = table.history
        if rows.size == 0:
            return [], 0
        busy = {n for tid in s.ledger.tasks() for n in s.ledger.nodes_of(tid)}
        src = [cols.names[i] for i in cols.src[rows].tolist()]
        dst = [cols.names[i] for i in cols.dst[rows].tolist()]
        touches = np.array([a in busy or b in busy for a, b in zip(src, dst, strict=True)], bool)
        q = np.asarray(table.q, np.float64)
        order = np.lexsort((np.arange(q.size), np.where(np.isnan(q), np.inf, q), ~touches))[:max(limit, 0)]
        out = [(src[k], dst[k], float(q[k]), float(table.p95[k]), float(table.loss[k])) for k in order.tolist()]
        return out, int(q.size - len(out))

    def routes(self, service_id: str, now: float) -> Routes | None:
        """A service's routing weights: the last published, else computed now (None: no such service)."""
        svc = self._sched.services.get(service_id)
        if svc is None:
            return None
        return svc.routes if svc.routes is not None else routes_for(self._sched, svc, now, "request")

    def open_incidents(self) -> list[Incident]:
        """The node failures open now, oldest first."""
        return open_incidents(self._sched.incidents)

    def summary(self, now: float, statuses: list[str]) -> SummaryAnswer:
        """The cluster's totals (``statuses``: every task record's status): nodes by state, cards up,
        booked and free, and the queue per team and class."""
        from collections import Counter

        s = self._sched
        books = self.node_books(now)
        up = [b for b in books if b.state != "down"]
        rows: dict[tuple[str, str], list[int]] = {}
        for p in s.pending.values():
            t = p.task
            row = rows.setdefault((t.team or DEFAULT_TEAM, "|".join(sorted(t.resources.accel_classes)) or ANY_CLASS),
                                  [0, 0, 0, 0])
            row[0] += 1
            row[1] += t.resources.cards * t.peers
        nodes = s.nodes(now)
        for r in s.running.values():
            i = nodes.index.get(r.nodes[0]) if r.nodes else None
            cls = nodes.class_names[nodes.node_class[i]] if i is not None else ANY_CLASS
            row = rows.setdefault((r.task.team or DEFAULT_TEAM, cls), [0, 0, 0, 0])
            row[2] += 1
            row[3] += r.task.resources.cards * len(r.nodes)
        return SummaryAnswer(tasks=dict(Counter(statuses)), nodes=dict(Counter(b.state for b in books)),
                             cards_up=sum(b.cards for b in up), cards_booked=sum(b.booked for b in books),
                             cards_free=sum(b.free for b in up),
                             queues=[QueueRow(team=k[0], accel_class=k[1], queued=v[0], queued_cards=v[1],
                                              running=v[2], running_cards=v[3]) for k, v in sorted(rows.items())])

    def class_cards(self, now: float) -> dict[str, int]:
        """Cards per accelerator class in the inventory (what quotas are checked against)."""
        nodes = self._sched.nodes(now)
        out: dict[str, int] = {}
        for cls, cards in zip(nodes.node_class.tolist(), nodes.capacity[:, 0].tolist(), strict=True):
            out[nodes.class_names[cls]] = out.get(nodes.class_names[cls], 0) + int(cards)
        return out

    def quota_usage(self, now: float) -> list[QuotaUsage]:
        """Every team's guarantee, limit and use per accelerator class of the inventory and in all
        (``ANY_CLASS``), with its queued tasks on the all-classes row."""
        s = self._sched
        qs = s.quotas.set
        if not qs.quotas:
            return []
        nodes = s.nodes(now)
        names = list(nodes.class_names) + [ANY_CLASS]
        g, m = s.quotas.arrays(nodes.class_names)
        use = s.quotas.use(list(s.running.values()), nodes.index, nodes.node_class, len(nodes.class_names)).use
        queued: dict[int, int] = {}
        for p in s.pending.values():
            t = s.quotas.team_of(p.task)
            if t is not None and t >= 0:
                queued[t] = queued.get(t, 0) + 1
        own = {(q.team, q.accel_class) for q in qs.quotas}
        usage = []
        for ti, team in enumerate(s.quotas.teams):
            for ci, cls in enumerate(names):
                if (team, cls) not in own and not (cls == ANY_CLASS or use[ti, ci]):
                    continue
                usage.append(QuotaUsage(team=team, accel_class=cls, guaranteed_cards=float(g[ti, ci]),
                                        max_cards=None if np.isinf(m[ti, ci]) else float(m[ti, ci]),
                                        used_cards=float(use[ti, ci]), borrowed_cards=float(max(use[ti, ci] - g[ti, ci], 0)),
                                        queued_tasks=queued.get(ti, 0) if cls == ANY_CLASS else 0))
        return usage
