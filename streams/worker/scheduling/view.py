"""What the worker's API may read of the scheduler: answers built from its state, never the state
objects themselves (the web holds a :class:`SchedulerView`, not the Scheduler: it cannot place,
book or release anything)."""

from __future__ import annotations

import numpy as np

from schemas.api import QuotaUsage, TaskEstimate
from schemas.quota import ANY_CLASS
from schemas.sched import Incident
from streams.worker.scheduling.failures import open_incidents
from streams.worker.scheduling.queue import expected_end


class SchedulerView:
    """Read-only answers from a :class:`~streams.worker.scheduling.state.Scheduler`."""

    def __init__(self, sched) -> None:
        self._sched = sched

    def estimate(self, task_id: str, now: float) -> TaskEstimate | None:
        """When a running task ends, or when the queue's head starts (its reservation); None for a
        task the scheduler does not hold."""
        s = self._sched
        run = s.running.get(task_id)
        if run is not None:
            return TaskEstimate(start=run.placed_at, end=expected_end(run, now),
                                basis="placed; ends when its expected_duration_s has run")
        why = s.waiting(task_id, now)
        if why is None:
            return None
        res = s.reservation
        if res is not None and res.task_id == task_id:
            return TaskEstimate(start=res.start, end=res.end, reserved_nodes=res.nodes, basis=why.detail,
                                reason=why.reason, position=why.position)
        return TaskEstimate(basis=why.detail, reason=why.reason, position=why.position)

    def open_incidents(self) -> list[Incident]:
        """The node failures open now, oldest first."""
        return open_incidents(self._sched.incidents)

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
