"""The replay's ground truth between nodes of racks in sites, and what a placement sees of it.

Between two nodes: the same node — no network; the same rack — ``rack_rtt_ms`` and the node link
``node_gbps``; the same site, other racks — ``site_rtt_ms`` and, through both racks' uplinks, the
node link or the uplink's share, whichever is smaller (an uplink of ``uplink_gbps`` is divided among
the jobs crossing it); other sites — the measured site RTT and the smaller of the measured site
throughput and both uplinks' shares. A job's members see the worst pair RTT and the narrowest pair
bandwidth (what the ring all-reduce of core.jobperf pays).
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
               site_gbps: np.ndarray, uplink_jobs: np.ndarray, fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """(rtt_ms, gbps) between nodes ``a[i]`` and ``b[i]``. ``uplink_jobs[s, r]``: jobs crossing rack r of
    site s (at least 1 counts: the job asking)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    sa, sb, ra, rb = node_site[a], node_site[b], node_rack[a], node_rack[b]
    same_node, same_rack = a == b, (sa == sb) & (ra == rb)
    same_site = sa == sb
    crossing = np.maximum(np.maximum(uplink_jobs[sa, ra], uplink_jobs[sb, rb]), 1)  # the busier uplink
    share = fabric.uplink_gbps / crossing
    rtt = np.where(same_node, 0.0, np.where(same_rack, fabric.rack_rtt_ms,
                                            np.where(same_site, fabric.site_rtt_ms, site_rtt_ms[sa, sb])))
    across = np.minimum(fabric.node_gbps, share)
    gbps = np.where(same_node, np.inf, np.where(same_rack, fabric.node_gbps,
                                                np.where(same_site, across, np.minimum(across, site_gbps[sa, sb]))))
    return rtt, gbps


def placement_paths(members: list[int], node_site: np.ndarray, node_rack: np.ndarray, site_rtt_ms: np.ndarray,
                    site_gbps: np.ndarray, uplink_jobs: np.ndarray, fabric: Fabric) -> tuple[float, float]:
    """(worst pair RTT ms, narrowest pair Gbit/s) among a job's members (0 and inf for one node)."""
    m = np.asarray(members, np.int64)
    if m.size < 2:
        return 0.0, float("inf")
    i, j = np.triu_indices(m.size, 1)
    rtt, gbps = pair_paths(m[i], m[j], node_site, node_rack, site_rtt_ms, site_gbps, uplink_jobs, fabric)
    return float(rtt.max()), float(gbps.min())
