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
from streams.replay.stores import store_of
from streams.worker.scheduling.decision import Scored
from streams.worker.scheduling.state import Scheduler


class TopologyScheduler(Scheduler):
    """Slurm's backfill plans with the limits users request (no run-time prediction) and the cards'
    metered speeds (no workload's measured ones), and serves the queue by age (its multifactor
    priority's age factor)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.durations = self.speeds = None
        self.queue_rule = "fifo"

    def _codes(self, nodes: NodeView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(site names, each node's site code, its rack code), once per node list."""
        memo = self._cache.get("topology")
        if memo is None or memo[0] is not nodes.regions or memo[1] is not nodes.racks:
            site_names, site = np.unique(np.array(list(nodes.regions), dtype=str), return_inverse=True)
            _, rack = np.unique(np.array(nodes.racks, dtype=str), return_inverse=True)
            memo = self._cache["topology"] = (nodes.regions, nodes.racks, (site_names, site, rack))
        return memo[2]

    def could_hold(self, task: Task, room: np.ndarray, nodes: NodeView) -> bool:
        """A gang never spans sites: some site must have room for all of it."""
        if task.peers <= 1:
            return bool(room.any())
        _, site, _ = self._codes(nodes)
        return int(np.bincount(site[room], minlength=1).max(initial=0)) >= task.peers

    def placement(self, task: Task, s: Scored, net, unknown_quality: float, nodes: NodeView, usable: np.ndarray,
                  reserve, now: float) -> Placement:
        site_names, site, rack = self._codes(nodes)
        home = -1
        if task.data_source is not None:  # the site whose store holds it (the replay's names: stores.store_of)
            home = {store_of(str(x)): i for i, x in enumerate(site_names)}.get(task.data_source.node, -1)
        n = need(task)
        left = usable[:, 0] - n[0]
        scores = topology_scores(np.isfinite(s.composite), task.peers, site, rack, home, left, s.compute)
        return place(scores, n, usable, gang=task.peers, reserve=reserve)
