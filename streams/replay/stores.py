"""Where the replay's data is, in truth (issue 53, E2): each job's data at its home site's store, and the
copies ours' scheduler stages at other sites' stores (streams/worker/scheduling/staging.py) — each
complete when the truth's path moves it, not when the scheduler expected. A job loads from its home
or the copy that has its data to its slowest member soonest (a copy being made: after it ends)."""

from __future__ import annotations

import math

import numpy as np

from streams.worker.scheduling.staging import STORE


def store_of(site: str) -> str:
    """The replay's store endpoint of ``site`` (the scheduler's default, staging.STORE)."""
    return STORE.format(site=site)


class SimStores:
    def __init__(self, cluster, truth, ideal_gbps: float, t0: float) -> None:
        self.cluster, self.truth, self.ideal_gbps = cluster, truth, ideal_gbps
        self.t0 = t0  # the scheduler's clock at the replay's zero (its copies' times are on it)
        self.site_of = {store_of(s): i for i, s in enumerate(cluster.sites)}
        self.ready: dict[str, dict[int, float]] = {}  # data set -> {site: when its copy is complete}

    def staged(self, task: str, s, at: float) -> None:
        """A copy the scheduler stages (CopyBook.on_stage) at ``at`` on its clock: it moves at the truth's
        rate between the two sites then (inside a site: the node link)."""
        a, b = self.site_of.get(s.source), self.site_of.get(s.target)
        if a is None or b is None:
            return
        f = self.truth.fabric
        rate = f.node_gbps if a == b else min(float(self.truth.site_gbps()[a, b]), f.node_gbps)
        self.ready.setdefault(s.name, {})[b] = at - self.t0 + s.size_gb * 8 / max(rate, 1e-9)

    def load_s(self, home: int, gb: float, name: str | None, members: list[int], uplink: np.ndarray, now: float,
               copies=None) -> float:
        """Extra time (beyond loading at the ideal bandwidth) to load ``gb`` of data set ``name`` to
        ``members``: from its ``home`` site's store, or a copy the scheduler's book (``copies``) still
        holds, whichever has it at the slowest member soonest."""
        if home < 0 or gb <= 0:
            return 0.0
        c, f = self.cluster, self.truth.fabric
        sites = c.node_site[members]
        racks = c.node_rack[members]
        share = f.uplink_gbps / np.maximum(uplink[sites, racks] + 1, 1) / self.truth.uplink_ratio[sites, racks]
        wan = self.truth.site_gbps()
        sources = [(home, now)]
        if copies is not None and name:
            sources += [(s, t) for s, t in self.ready.get(name, {}).items()
                        if s != home and copies.has(name, store_of(c.sites[s]))]
        best = math.inf
        for site, ready in sources:
            path = np.where(sites == site, np.minimum(f.node_gbps, share), np.minimum(share, wan[site, sites]))
            best = min(best, max(ready - now, 0.0) + gb * 8 / float(path.min()))
        return max(best - gb * 8 / self.ideal_gbps, 0.0)
