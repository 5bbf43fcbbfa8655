"""The replay's ground truth between nodes of racks in sites, and what a placement sees of it.

Between two nodes: the same node — no network; the same rack — ``rack_rtt_ms`` and the node link
``node_gbps``; the same site, other racks — ``site_rtt_ms`` and, through both racks' uplinks, the
node link or the uplink's share, whichever is smaller (an uplink of ``uplink_gbps`` is divided among
the jobs crossing it); other sites — the measured site RTT and the smaller of the measured site
throughput and both uplinks' shares. A job's members see the worst pair RTT and the narrowest pair
bandwidth (what the ring all-reduce of core.jobperf pays). ``uplink_ratio[s, r]`` (1 where not given):
rack r of site s's uplink runs at that times its RTT and 1/that of its capacity (congestion inside a
site, issue 53's E5): a path inside the site crossing it sees ``site_rtt_ms`` x the larger ratio of
its two uplinks, and every path crossing it the capacity left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fabric:
    rack_rtt_ms: float = 0.05
    site_rtt_ms: float = 0.2
    node_gbps: float = 100.0
    uplink_gbps: float = 200.0


def pair_paths(a: np.ndarray, b: np.ndarray, node_site: np.ndarray, node_rack: np.ndarray, site_rtt_ms: np.ndarray,
               site_gbps: np.ndarray, uplink_jobs: np.ndarray, fabric: Fabric,
               uplink_ratio: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rtt_ms, gbps) between nodes ``a[i]`` and ``b[i]``. ``uplink_jobs[s, r]``: jobs crossing rack r of
    site s (at least 1 counts: the job asking)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    sa, sb, ra, rb = node_site[a], node_site[b], node_rack[a], node_rack[b]
    same_node, same_rack = a == b, (sa == sb) & (ra == rb)
    same_site = sa == sb
    qa, qb = (1.0, 1.0) if uplink_ratio is None else (uplink_ratio[sa, ra], uplink_ratio[sb, rb])
    # the uplink that leaves the least: its capacity (cut by its ratio) over the jobs crossing it
    crossing = np.maximum(np.maximum(uplink_jobs[sa, ra], 1) * qa, np.maximum(uplink_jobs[sb, rb], 1) * qb)
    share = fabric.uplink_gbps / crossing
    inside = fabric.site_rtt_ms * np.maximum(qa, qb)
    rtt = np.where(same_node, 0.0, np.where(same_rack, fabric.rack_rtt_ms,
                                            np.where(same_site, inside, site_rtt_ms[sa, sb])))
    across = np.minimum(fabric.node_gbps, share)
    gbps = np.where(same_node, np.inf, np.where(same_rack, fabric.node_gbps,
                                                np.where(same_site, across, np.minimum(across, site_gbps[sa, sb]))))
    return rtt, gbps


def placement_paths(members: list[int], node_site: np.ndarray, node_rack: np.ndarray, site_rtt_ms: np.ndarray,
                    site_gbps: np.ndarray, uplink_jobs: np.ndarray, fabric: Fabric,
                    uplink_ratio: np.ndarray | None = None) -> tuple[float, float]:
    """(worst pair RTT ms, narrowest pair Gbit/s) among a job's members (0 and inf for one node)."""
    m = np.asarray(members, np.int64)
    if m.size < 2:
        return 0.0, float("inf")
    i, j = np.triu_indices(m.size, 1)
    rtt, gbps = pair_paths(m[i], m[j], node_site, node_rack, site_rtt_ms, site_gbps, uplink_jobs, fabric,
                           uplink_ratio)
    return float(rtt.max()), float(gbps.min())
