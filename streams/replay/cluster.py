"""The replayed cluster: K sites from the network measurements (every pair measured both ways, RTT and
throughput), each with racks of nodes of cards. Rack uplinks are shared and may be oversubscribed:
``uplink_gbps = nodes_per_rack x node_gbps / oversubscription``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from streams.replay.dynamics import PairSeries, RackSeries
from streams.replay.traces import SitePaths, TraceError


@dataclass(frozen=True)
class ClusterSpec:
    sites: int = 4
    racks_per_site: int = 4
    nodes_per_rack: int = 8
    cards_per_node: int = 8
    node_gbps: float = 100.0
    oversubscription: float = 4.0
    regions: str = "best"  # the best-connected measured regions, or "random": drawn per seed (issue 53, E1)

    def __post_init__(self) -> None:
        for name in ("sites", "racks_per_site", "nodes_per_rack", "cards_per_node"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.node_gbps <= 0 or self.oversubscription < 1:
            raise ValueError("node_gbps > 0 and oversubscription >= 1")
        if self.regions not in ("best", "random"):
            raise ValueError("regions is best or random")

    @property
    def uplink_gbps(self) -> float:
        return self.nodes_per_rack * self.node_gbps / self.oversubscription


@dataclass
class Cluster:
    spec: ClusterSpec
    sites: list[str]
    rtt_ms: np.ndarray  # float64[K, K] between sites (0 on the diagonal)
    gbps: np.ndarray  # float64[K, K]
    node_ids: list[str]
    node_site: np.ndarray  # int64[N]
    node_rack: np.ndarray  # int64[N] rack number within its site
    series: PairSeries | None = None  # the site pairs' values over time (streams/replay/dynamics.py)
    spread: np.ndarray | None = None  # float64[K, K] measured RTT spread (ping mdev / avg; NaN: none)
    drawn_from: SitePaths | None = None  # regions="random": every measured region, K drawn per seed
    uplinks: RackSeries | None = None  # the rack uplinks' ratios over time (issue 53's E5; dynamics.py)

    def seeded(self, seed: int) -> Cluster:
        """The cluster of seed ``seed``: with regions drawn at random (``drawn_from``), its K sites
        drawn from ``seed`` (:func:`draw_sites`); and node ids that sort the sites in an order drawn
        from ``seed`` (``<k>-<site>.r<r>.n<i>``): the Scheduler breaks ties between equal nodes by id, so
        a tie falls on a site by the seed, never by its name (the sites' order and every array stay as
        they are)."""
        c = self if self.drawn_from is None else \
            _of_sites(self.drawn_from, self.spec, draw_sites(self.drawn_from, self.spec.sites, seed), self.drawn_from)
        rank = np.random.default_rng(seed + 43).permutation(len(c.sites))
        width = len(str(len(c.sites)))
        ids = [f"{rank[s]:0{width}d}-{x}" for s, x in zip(c.node_site, c.base_ids(), strict=True)]
        return dataclasses.replace(c, node_ids=ids)

    def base_ids(self) -> list[str]:
        per = self.spec.nodes_per_rack
        return [f"{self.sites[s]}.r{r}.n{i % per}" for i, (s, r) in enumerate(zip(self.node_site, self.node_rack,
                                                                                   strict=True))]


def full_pairs(paths: SitePaths) -> np.ndarray:
    """bool[S, S]: both directions measured, RTT and throughput."""
    m = ~np.isnan(paths.rtt_ms) & ~np.isnan(paths.gbps)
    both = m & m.T
    np.fill_diagonal(both, False)
    return both


def pick_sites(paths: SitePaths, k: int) -> list[int]:
    """K sites with every pair fully measured: greedily, the best-connected first (most measured
    pairs, then the most throughput to and from the others; a name decides only between sites whose
    measurements are identical); TraceError when the measurements hold no such K sites."""
    ok = full_pairs(paths)
    degree = ok.sum(axis=1)
    g = np.where(ok, paths.gbps, 0.0)
    capacity = g.sum(axis=1) + g.sum(axis=0)
    chosen: list[int] = []
    candidates = list(np.lexsort((np.array(paths.sites), -capacity, -degree)))
    while len(chosen) < k:
        nxt = next((int(c) for c in candidates if c not in chosen and all(ok[c, x] for x in chosen)), None)
        if nxt is None:
            raise TraceError(f"the network measurements hold no {k} sites with every pair measured "
                             f"(found {len(chosen)}: {', '.join(paths.sites[i] for i in chosen)})")
        chosen.append(nxt)
    return chosen


def draw_sites(paths: SitePaths, k: int, seed: int) -> list[int]:
    """K sites with every pair fully measured, drawn at random from ``seed``: the regions in an order
    drawn from it, each taken when it is measured with every one taken before; TraceError when a
    hundred orders find no K such sites."""
    ok = full_pairs(paths)
    rng = np.random.default_rng(seed + 61)
    best: list[int] = []
    for _ in range(100):
        chosen: list[int] = []
        for c in rng.permutation(len(paths.sites)).tolist():
            if all(ok[c, x] for x in chosen):
                chosen.append(c)
                if len(chosen) == k:
                    return chosen
        best = max(best, chosen, key=len)
    raise TraceError(f"the network measurements hold no {k} sites with every pair measured that a random "
                     f"draw finds (found {len(best)})")


def build_cluster(paths: SitePaths, spec: ClusterSpec) -> Cluster:
    """The replayed cluster: the ``spec.sites`` best-connected sites of ``paths`` (:func:`pick_sites`),
    or with ``spec.regions`` "random" sites drawn per seed (:meth:`Cluster.seeded`; this one holds
    those of seed 0)."""
    if spec.regions == "random":
        return _of_sites(paths, spec, draw_sites(paths, spec.sites, 0), paths)
    return _of_sites(paths, spec, pick_sites(paths, spec.sites))


def _of_sites(paths: SitePaths, spec: ClusterSpec, idx: list[int], drawn_from: SitePaths | None = None) -> Cluster:
    rtt = paths.rtt_ms[np.ix_(idx, idx)].copy()
    gbps = paths.gbps[np.ix_(idx, idx)].copy()
    np.fill_diagonal(rtt, 0.0)
    np.fill_diagonal(gbps, np.inf)
    names = [paths.sites[i] for i in idx]
    per_site = spec.racks_per_site * spec.nodes_per_rack
    node_site = np.repeat(np.arange(spec.sites), per_site)
    node_rack = np.tile(np.repeat(np.arange(spec.racks_per_site), spec.nodes_per_rack), spec.sites)
    series = paths.series.restricted(idx) if paths.series is not None else None
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = paths.rtt_mdev_ms[np.ix_(idx, idx)] / paths.rtt_ms[np.ix_(idx, idx)]
    spread = np.where(np.isfinite(spread) & (spread >= 0), spread, np.nan)
    c = Cluster(spec, names, rtt, gbps, [], node_site, node_rack, series, spread, drawn_from)
    c.node_ids = c.base_ids()
    return c
