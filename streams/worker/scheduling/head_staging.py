"""The head of the queue's data copied ahead to where it will run (issue 53, data that follows compute).

A queued task that cannot be placed now and comes first holds a reservation: the nodes that free
first, from when the running tasks there are expected to end (queue.py). A gang that waits for a
closer set has its data staged there while it waits (seconds.Costing.gang); a task held by the
head's reservation is no different — when its data is named and far, a copy is staged at the store
of the reservation's site as soon as the reservation is made, booked on the path like any copy, and
the task's placement there reads it (or carries it again, seconds.Costing.stage and
staging.CopyBook.take). Live, the queued decision that says so carries the staging and the nodes it
waits for (``waits_for``): the Slurm bridge runs the copy ahead on the first of them, as for a gang.
A copy already there or coming is not staged again (the decision is made once per copy).
"""

from __future__ import annotations

import numpy as np

from schemas.sched import Staging, Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoints
from streams.worker.scheduling.seconds import Costing, decided_in_seconds
from streams.worker.scheduling.staging import load_name

HELD = "held for its reservation"  # the reason a head's queued decision gives (its copy ahead)


def stage_for_head(sched, task: Task, nodes: NodeView, now: float) -> list[Staging] | None:
    """Stage the data of ``task``, the head of the queue holding ``sched.reservation``, at the store of
    the reservation's site (:meth:`seconds.Costing.stage`, ahead): the copies its queued decision
    carries (queue.QueueMixin.queued_decision), or None when nothing was staged (no copies kept, its
    placement not decided in seconds, no named data, a copy there or coming, no store there, or it
    starts now)."""
    res = sched.reservation
    if res is None or res.task_id != task.id or res.start <= now or not sched.copies.on \
            or sched.placement_rule != "seconds" or not decided_in_seconds(task, sched.types) or not load_name(task):
        return None
    rows = np.array([nodes.index[n] for n in res.nodes if n in nodes.index], np.int64)
    if rows.size != len(res.nodes):
        return None
    profile = sched._profile(task)
    Costing(sched, task, sched.network(endpoints([task]), nodes, profile), nodes, now).stage(rows, ahead=True)
    return sched.copies.take(task.id).get("staging") or None
