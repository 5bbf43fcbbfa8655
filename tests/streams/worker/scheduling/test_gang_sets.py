"""gang_sets.sets_paths: a gang's candidate sets judged by their members' paths. Read at rack level,
one compiled pass (core.pairs.rack_pairs) gives what the array form (sets_paths_arrays) gives, bit for
bit: missing paths and racks, a node without a rack, dark paths (loss at or past core.failures'
LOST_LOSS) either way, NIC utilisation, bookings between racks and between other endpoints."""

import numpy as np
import pytest

from core.ect import ONE_RACK
from core.failures import LOST_LOSS
from core.pairs import rack_pairs, sets_worst_narrow
from streams.worker.scheduling.bandwidth import booked_rack_pairs, rack_codes
from streams.worker.scheduling.gang_sets import pairs_arrays, sets_paths
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0


def world(rng, racks: int = 5, per: int = 3):
    """Nodes in racks (the last node reports none), rack-level paths with some missing, some lossy
    (a few dark), node NICs partly used."""
    nodes = [gpu_node(f"n{r}{i}", NOW, **({"rack": f"r{r}"} if (r, i) != (racks - 1, per - 1) else {}),
                      inter_bw_gbps=float(rng.choice([100.0, 200.0, 400.0])))
             for r in range(racks) for i in range(per)]
    paths = {}
    for a in range(racks):
        for b in range(racks):
            if rng.random() < 0.15:
                continue  # not probed
            m = {"rtt_ms": win(NOW, 0.05 if a == b else float(rng.uniform(0.2, 80)))}
            if rng.random() < 0.3:
                m["loss_rate"] = {**win(NOW, 1.0), "mean": float(rng.choice([0.001, 0.2, LOST_LOSS, 0.99]))}
            paths[(f"rack:r{a}", f"rack:r{b}")] = m
    for n in nodes[:: 4]:
        paths[(n["node"], "")] = {"bw_util": {**win(NOW, 1.0), "mean": float(rng.uniform(0, 0.99))}}
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = float("inf"), None
    return s


@pytest.mark.parametrize("seed", range(6))
def test_rack_level_sets_read_in_one_pass_as_in_array_steps(seed):
    from schemas.sched import Task
    from streams.adapters.tasks import endpoints

    rng = np.random.default_rng(seed)
    s = world(rng)
    nodes = s.nodes(NOW)
    t = Task(id="g", type="training-data-parallel", peers=3, resources={"cards": 8}, submitted_at=NOW)
    net = s.network(endpoints([t]), nodes, s._profile(t))
    racks = sorted({f"rack:r{r}" for r in range(5)})
    book = {(a, b): float(rng.uniform(0, 300)) for a in racks for b in racks if a != b and rng.random() < 0.4}
    book[("store0", "rack:r1")] = 5.0  # not between racks: read by nothing here
    for g in (2, 3, 4):
        sets = np.array([rng.choice(len(nodes.ids), g, replace=False) for _ in range(40)], np.int64)
        for booked in ({}, book):
            t = net.table
            src, towards, _ = t.sources(nodes.ids)
            keys, vals = booked_rack_pairs(booked, rack_codes(t)) if booked else (None, np.zeros(0))
            got = rack_pairs(sets, src, towards, t.node_rack, t.p95, t.loss, LOST_LOSS, nodes.link_gbps, t.headroom,
                             keys, vals, len(rack_codes(t)))
            want = pairs_arrays(net, sets, booked)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (seed, g, len(booked))
            got = sets_paths(net, sets, booked)  # the whole judgement: worst, narrowest, every pair measured
            want = sets_worst_narrow(*pairs_arrays(net, sets, booked), ONE_RACK.ideal_rtt_ms)
            for a, b in zip(got, want, strict=True):
                assert a.tobytes() == b.tobytes(), (seed, g, len(booked))
    assert net.table.any_at_least("loss", LOST_LOSS) or seed  # some world has a dark path
