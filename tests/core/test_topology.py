import numpy as np
import pytest

from core.topology import Fabric, pair_paths, placement_paths

# two sites (RTT 80 ms, 5 Gbit/s between them), two racks each, two nodes per rack: nodes 0-3 at site 0
# (racks 0, 0, 1, 1), nodes 4-7 at site 1
SITE = np.array([0, 0, 0, 0, 1, 1, 1, 1])
RACK = np.array([0, 0, 1, 1, 0, 0, 1, 1])
RTT = np.array([[0.0, 80.0], [80.0, 0.0]])
GBPS = np.array([[np.inf, 5.0], [5.0, np.inf]])
F = Fabric(rack_rtt_ms=0.05, site_rtt_ms=0.2, node_gbps=100.0, uplink_gbps=200.0)


def test_pairs_worked_example():
    jobs = np.array([[4, 1], [1, 1]])  # 4 jobs cross site 0 rack 0's uplink
    rtt, gbps = pair_paths([0, 0, 0, 0, 2], [0, 1, 2, 4, 6], SITE, RACK, RTT, GBPS, jobs, F)
    assert rtt.tolist() == [0.0, 0.05, 0.2, 80.0, 80.0]
    # same node: no network; same rack: the node link; rack 0 -> rack 1 of the same site: the busier
    # uplink's share 200 / 4 = 50; to the other site: min(50, 5) = 5; from the idle rack 1: min(100, 200, 5)
    assert gbps.tolist() == [np.inf, 100.0, 50.0, 5.0, 5.0]


def test_a_placement_sees_its_worst_pair():
    idle = np.zeros((2, 2))
    assert placement_paths([0, 1], SITE, RACK, RTT, GBPS, idle, F) == (0.05, 100.0)  # one rack
    assert placement_paths([0, 1, 2], SITE, RACK, RTT, GBPS, idle, F) == (0.2, 100.0)  # uplink 200 > node 100
    assert placement_paths([0, 1, 5], SITE, RACK, RTT, GBPS, idle, F) == (80.0, 5.0)  # across sites
    assert placement_paths([3], SITE, RACK, RTT, GBPS, idle, F) == (0.0, float("inf"))
    busy = np.array([[0, 8], [0, 0]])  # 8 jobs on site 0 rack 1's uplink: 25 Gbit/s each
    assert placement_paths([0, 2], SITE, RACK, RTT, GBPS, busy, F)[1] == pytest.approx(25.0)


def test_an_uplink_running_slow_stretches_the_paths_that_cross_it():
    # issue 53's E5: site 0 rack 0's uplink at 2x its RTT (ratio 2), 4 jobs crossing it, 1 on the others
    jobs, ratio = np.array([[4, 1], [1, 1]]), np.array([[2.0, 1.0], [1.0, 1.0]])
    rtt, gbps = pair_paths([0, 0, 0, 2], [1, 2, 4, 3], SITE, RACK, RTT, GBPS, jobs, F, ratio)
    # inside the rack: no uplink crossed; rack 0 -> rack 1: 0.2 ms x 2; across sites: the WAN's RTT
    assert rtt.tolist() == [0.05, 0.4, 80.0, 0.05]
    # rack 0 -> rack 1: capacity 200 / 2 shared by 4 = 25 (the other uplink leaves 200); to site 1: min(25, 5)
    assert gbps.tolist() == [100.0, 25.0, 5.0, 100.0]
    # ratio 1 everywhere is the fabric without it
    same = pair_paths([0, 0, 0], [1, 2, 4], SITE, RACK, RTT, GBPS, jobs, F, np.ones((2, 2)))
    plain = pair_paths([0, 0, 0], [1, 2, 4], SITE, RACK, RTT, GBPS, jobs, F)
    assert [x.tolist() for x in same] == [x.tolist() for x in plain]
