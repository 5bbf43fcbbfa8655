"""Running gangs scored together (migration.GangScores: one kernel call per profile over the endpoints
of them all, before feasibility) give each gang, once masked by its own room, the scores it got scored
alone with its own endpoints and room — value for value — over gangs of two profiles, different data
endpoints, card counts that fit only some nodes, a full node, a failed node and a class restriction."""

import time

import numpy as np

from core.energy import blend
from core.feasibility import covers
from core.scoring import evolved, score_parts
from schemas.sched import Task
from streams.adapters.tasks import endpoint_rows, endpoints, scoring_inputs
from streams.worker.scheduling.migration import GangScores, own_room
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def alone(s, r, nodes, now):
    """What migrate_gang scored before GangScores: the gang alone, its own room in the inputs."""
    eps = endpoints([r.task])
    net = s.network(eps, nodes, r.profile)
    members = [nodes.index[n] for n in r.nodes]
    usable, _ = own_room(s, r, nodes, members, now)
    x = evolved(scoring_inputs([r.task], [r.alpha], nodes, eps, net, s.types, scope=s.compute_scope), usable=usable)
    raw, network = score_parts(x)
    return raw[0], network[0], usable, net.end[endpoint_rows(x, 0)]


def test_gangs_scored_together_are_the_gangs_scored_alone():
    now = time.time()
    names = [f"n{i}" for i in range(8)]
    paths = {}
    rng = np.random.default_rng(3)
    for k, a in enumerate(names):
        paths[(a, "store-a")] = {"rtt_ms": win(now, float(rng.uniform(0.3, 40)))}
        paths[(a, "store-b")] = {"rtt_ms": win(now, float(rng.uniform(0.3, 40)), lost=k % 3)}
        for b in names[k + 1:]:
            paths[(a, b)] = {"rtt_ms": win(now, float(rng.uniform(0.2, 20)))}
    nodes = [gpu_node(n, now, fp16=800.0 + 100 * k, **({"status": "down"} if n == "n7" else {}))
             for k, n in enumerate(names)]
    s = make_scheduler(nodes, paths)
    s.placement_rule, s.gang_closeness = "points", 0.0  # no gang waits for a closer one: all are placed at once
    gangs = [
        Task(id="g1", type="training-data-parallel", peers=2, resources={"cards": 4},
             data_source={"node": "store-a", "size_gb": 50}),
        Task(id="g2", type="training-data-parallel", peers=3, resources={"cards": 2}, network_profile="latency",
             data_source={"node": "store-b", "size_gb": 5}),
        Task(id="g3", type="training-data-parallel", peers=2, resources={"cards": 8}),  # fills its nodes
        Task(id="g4", type="training-data-parallel", peers=2, resources={"cards": 3}, network_profile="latency",
             data_source={"node": "store-a", "size_gb": 1}, model_repo={"node": "store-b", "size_gb": 2}),
    ]
    for t in sorted(gangs, key=lambda t: -t.resources.cards):  # the whole-node gang first
        assert s.decide(t, now).status == "placed", t.id
    view = s.nodes(now + 1)
    assert not view.available[view.index["n7"]]
    runs = [s.running[t.id] for t in gangs]
    assert {r.profile for r in runs} == {"bandwidth", "latency"}
    together = GangScores(s, runs, view)
    for r in runs:
        raw, network, usable, ends = alone(s, r, view, now + 1)
        net, x, t, composite, net_row = together.of[r.task.id]
        got = np.where(covers(np.asarray(usable, np.float32), np.asarray(x.need[t], np.float32)), composite,
                       np.float32(-np.inf))
        np.testing.assert_array_equal(got, raw)
        np.testing.assert_array_equal(net_row, network)
        np.testing.assert_array_equal(net.end[endpoint_rows(x, t)], ends)  # its own paths, in its own order
        np.testing.assert_array_equal(blend(got[None, :], [0.0], view.energy), blend(raw[None, :], [0.0], view.energy))
        assert np.isfinite(raw).any() and not np.isfinite(raw).all()  # some nodes fit, some do not
