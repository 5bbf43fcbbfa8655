"""The replay's topology-aware baseline as a Scheduler: the same queue (priority, the head's
reservation, backfill on the same duration estimates), the same filters and books as ours; only the
choice among the nodes that fit is the topology rule of core.placement.topology_scores (data-local,
card-aware, a gang in one rack or one site or not at all, best fit)."""

from __future__ import annotations

import numpy as np

from core.placement import Placement, place, topology_scores
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import need
from streams.worker.scheduling.decision import Scored
from streams.worker.scheduling.state import Scheduler


class TopologyScheduler(Scheduler):
    def placement(self, task: Task, s: Scored, net, unknown_quality: float, nodes: NodeView, usable: np.ndarray,
                  reserve) -> Placement:
        regions = list(nodes.regions)
        site_names, site = np.unique(np.array(regions, dtype=str), return_inverse=True)
        _, rack = np.unique(np.array(nodes.racks, dtype=str), return_inverse=True)
        home = -1
        if task.data_source is not None:
            where = task.data_source.node.removeprefix("store.")
            home = int(np.flatnonzero(site_names == where)[0]) if where in site_names else -1
        n = need(task)
        left = usable[:, 0] - n[0]
        scores = topology_scores(np.isfinite(s.composite), task.peers, site, rack, home, left, s.compute)
        return place(scores, n, usable, gang=task.peers, reserve=reserve)
