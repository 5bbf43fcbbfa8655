"""Where the replay's data is, in truth (issue 53, E2): each job's data at its home site's store, and the
copies ours' scheduler stages at other sites' stores (streams/worker/scheduling/staging.py) — each
complete when the truth's path moves it, not when the scheduler expected. A job loads from its home
or the copy that has its data to its slowest member soonest (a copy being made: after it ends)."""

from __future__ import annotations

import math

import numpy as np


class SimStores:
    def __init__(self, cluster, truth, ideal_gbps: float, t0: float) -> None:
        self.cluster, self.truth, self.ideal_gbps = cluster, truth, ideal_gbps
        self.t0 = t0  # the scheduler's clock at the replay's zero (its copies' times are on it)
        self.site_of = {f"store.{s}": i for i, s in enumerate(cluster.sites)}
        self.ready: dict[str, dict[int, float]] = {}  # data set -> {site: when its copy is complete}
        self.seen = 0  # the scheduler's staged copies taken in so far

    def sync(self, copies, now: float) -> None:
        """Take in the copies the scheduler staged since the last call: each moves at the truth's rate
        between the two sites now (inside a site: the node link)."""
        if copies is None:
            return
        gbps, f = self.truth.site_gbps(), self.truth.fabric
        for _, s, at in copies.staged[self.seen:]:
            a, b = self.site_of.get(s.source), self.site_of.get(s.target)
            if a is None or b is None:
                continue
            rate = f.node_gbps if a == b else min(float(gbps[a, b]), f.node_gbps)
            self.ready.setdefault(s.name, {})[b] = max(at - self.t0, now) + s.size_gb * 8 / max(rate, 1e-9)
        self.seen = len(copies.staged)

    def load_s(self, home: int, gb: float, name: str | None, members: list[int], uplink: np.ndarray, now: float,
               copies=None) -> float:
        """Extra time (beyond loading at the ideal bandwidth) to load ``gb`` of data set ``name`` to
        ``members``: from its ``home`` site's store, or a copy the scheduler's book (``copies``) still
        holds, whichever has it at the slowest member soonest."""
        if home < 0 or gb <= 0:
            return 0.0
        c, f = self.cluster, self.truth.fabric
        sites = c.node_site[members]
        share = f.uplink_gbps / np.maximum(uplink[sites, c.node_rack[members]] + 1, 1)
        wan = self.truth.site_gbps()
        sources = [(home, now)]
        if copies is not None and name:
            sources += [(s, t) for s, t in self.ready.get(name, {}).items()
                        if s != home and copies.has(name, f"store.{c.sites[s]}")]
        best = math.inf
        for site, ready in sources:
            path = np.where(sites == site, np.minimum(f.node_gbps, share), np.minimum(share, wan[site, sites]))
            best = min(best, max(ready - now, 0.0) + gb * 8 / float(path.min()))
        return max(best - gb * 8 / self.ideal_gbps, 0.0)
