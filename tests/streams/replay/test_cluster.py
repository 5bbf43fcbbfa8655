"""The replayed cluster: K sites with every pair measured, racks of nodes, shared uplinks."""

import re

import numpy as np
import pytest

from schemas.compute import NODE_ID_PATTERN
from streams.replay.cluster import ClusterSpec, build_cluster, full_pairs, pick_sites
from streams.replay.traces import SitePaths, TraceError
from tests.streams.replay.test_traces import DATA, needs_data


def paths(rtt, gbps, names=None):
    rtt, gbps = np.array(rtt, float), np.array(gbps, float)
    n = rtt.shape[0]
    nan = np.full((n, n), np.nan)
    return SitePaths(names or [f"s{i}" for i in range(n)], rtt, nan, nan, nan, gbps)


def test_greedy_picks_a_fully_measured_clique():
    # s0-s1-s2 all measured both ways; s3 misses s3->s1 throughput; s0 best connected
    n = np.nan
    rtt = [[0, 10, 20, 30], [10, 0, 15, 25], [20, 15, 0, 5], [30, 25, 5, 0]]
    gbps = [[n, 5, 5, 5], [5, n, 5, 5], [5, 5, n, 5], [5, n, 5, n]]
    p = paths(rtt, gbps)
    assert full_pairs(p).sum(axis=1).tolist() == [3, 2, 3, 2]
    assert pick_sites(p, 3) == [0, 2, 1]  # s0 and s2 (3 partners each), then s1 (s3 lacks s1)
    with pytest.raises(TraceError, match="no 4 sites with every pair measured"):
        pick_sites(p, 4)


def test_cluster_layout_worked_example():
    n = np.nan
    p = paths([[0, 10], [10, 0]], [[n, 8], [9, n]], names=["aws:eu-west-1", "gcp:us-east1-b"])
    c = build_cluster(p, ClusterSpec(sites=2, racks_per_site=2, nodes_per_rack=3, cards_per_node=8,
                                     node_gbps=100, oversubscription=4))
    assert len(c.node_ids) == 12 and c.node_site.tolist() == [0] * 6 + [1] * 6
    assert c.node_rack.tolist() == [0, 0, 0, 1, 1, 1] * 2 and c.node_ids[4] == "aws:eu-west-1.r1.n1"
    assert all(re.match(NODE_ID_PATTERN, x) for x in c.node_ids)
    assert c.spec.uplink_gbps == 75.0  # 3 nodes x 100 Gbit/s / 4
    assert c.rtt_ms.tolist() == [[0, 10], [10, 0]] and c.gbps[0, 1] == 8 and c.gbps[1, 0] == 9


@needs_data
def test_real_skyplane_sites():
    from streams.replay.traces import load_skyplane

    p = load_skyplane(DATA / "network/skyplane/latency.csv.gz", DATA / "network/skyplane/throughput.csv.gz")
    c = build_cluster(p, ClusterSpec(sites=6))
    off = ~np.eye(6, dtype=bool)
    assert np.isfinite(c.rtt_ms[off]).all() and (c.rtt_ms[off] > 0).all() and np.isfinite(c.gbps[off]).all()
    assert len(set(c.sites)) == 6 and len(c.node_ids) == 6 * 4 * 8


def test_random_regions_are_drawn_per_seed_among_fully_measured_ones():
    n = np.nan
    # s3 lacks s3->s1 throughput: no draw may hold both s1 and s3
    rtt = [[0, 10, 20, 30, 40], [10, 0, 15, 25, 35], [20, 15, 0, 5, 6], [30, 25, 5, 0, 7], [40, 35, 6, 7, 0]]
    gbps = [[n, 5, 5, 5, 5], [5, n, 5, 5, 5], [5, 5, n, 5, 5], [5, n, 5, n, 5], [5, 5, 5, 5, n]]
    p = paths(rtt, gbps)
    spec = ClusterSpec(sites=3, racks_per_site=1, nodes_per_rack=2, cards_per_node=8, regions="random")
    c = build_cluster(p, spec)
    drawn = {tuple(c.seeded(seed).sites) for seed in range(40)}
    assert len(drawn) >= 4  # seeds draw different regions
    for sites in drawn:
        assert len(set(sites)) == 3 and not {"s1", "s3"} <= set(sites)
    one = c.seeded(7)
    assert one.sites == c.seeded(7).sites  # the same seed, the same regions
    idx = [p.sites.index(s) for s in one.sites]
    np.testing.assert_array_equal(one.rtt_ms, np.where(np.eye(3, dtype=bool), 0.0, p.rtt_ms[np.ix_(idx, idx)]))
    assert all(x.split("-", 1)[1].split(".")[0] in one.sites for x in one.node_ids)
    assert build_cluster(p, ClusterSpec(sites=3, racks_per_site=1, nodes_per_rack=2)).seeded(7).sites == \
        build_cluster(p, ClusterSpec(sites=3, racks_per_site=1, nodes_per_rack=2)).seeded(8).sites  # best: fixed
    with pytest.raises(TraceError, match="no 5 sites"):
        build_cluster(p, ClusterSpec(sites=5, racks_per_site=1, nodes_per_rack=2, regions="random"))
    with pytest.raises(ValueError, match="regions is best or random"):
        ClusterSpec(regions="nearest")
