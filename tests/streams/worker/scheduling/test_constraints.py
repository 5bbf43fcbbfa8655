"""Placement constraints as filters with reasons: data residency (regions), tiers, soft anti-affinity
(a service's replicas spread over nodes while enough fit), a gang kept in one rack; and a move keeps
them too."""

import time

import numpy as np

from core.placement import best_group
from schemas.sched import Task
from streams.worker.scheduling.constraints import masked
from streams.worker.scheduling.services import Service, evaluate
from tests.helpers.scheduling import gpu_node, make_scheduler, win

# eu-a (rack r1, centre, the strongest), eu-b (rack r2, province), us-a (rack r1, edge), us-b (r2, edge)
NODES = {"eu-a": ("eu", "r1", "centre", 2000.0), "eu-b": ("eu", "r2", "province", 1000.0),
         "us-a": ("us", "r1", "edge", 1900.0), "us-b": ("us", "r2", "edge", 1800.0)}


def world(now, **extra):
    reports = [gpu_node(n, now, fp16=f, region=reg, rack=rack, tier=tier, **extra)
               for n, (reg, rack, tier, f) in NODES.items()]
    paths = {(n, "hub"): {"rtt_ms": win(now, 1.0)} for n in NODES}
    return make_scheduler(reports, paths)


def task(tid="t", **kw):
    return Task(id=tid, type="inference", resources={"cards": kw.pop("cards", 4)}, **kw)


def test_residency_and_tiers_rule_nodes_out_with_their_reasons():
    now = time.time()
    s = world(now)
    d = s.decide(task(constraints={"regions": ["us"]}), now)
    assert d.nodes == ["us-a"] and d.rejected == {"eu-a": "region_not_allowed", "eu-b": "region_not_allowed"}
    d = s.decide(task("p", constraints={"tiers": ["province"]}), now)
    assert d.nodes == ["eu-b"] and d.rejected_counts == {"tier_not_allowed": 3}
    d = s.decide(task("none", constraints={"regions": ["asia"]}), now)
    assert d.status == "unschedulable" and d.rejected_counts == {"region_not_allowed": 4}


def test_replicas_spread_over_nodes_while_enough_fit():
    now = time.time()
    s = world(now)
    svc = Service(task("chat", cards=2, scaling={"min_replicas": 4, "max_replicas": 8, "prescale_lead_s": 0}))
    out = evaluate(s, svc, now, reason="created")
    # four replicas of 2 cards would all fit on eu-a (8 cards); spread puts one on each node
    assert sorted(n for d in out.decisions for n in d.nodes) == sorted(NODES)
    assert out.decisions[1].rejected == {"eu-a": "anti_affinity"}
    # a fifth replica finds every node taken by a sibling: it goes beside one (soft)
    svc.busy, svc.request_rate = 4 * 0.75, 100.0  # ceil(4 x 0.75 / 0.6) = 5
    more = evaluate(s, svc, now + 1)
    assert more.change.to_replicas == 5 and more.decisions[0].nodes == ["eu-a"]


def test_spread_off_packs_the_best_node():
    now = time.time()
    s = world(now)
    svc = Service(task("pack", cards=2, scaling={"min_replicas": 3, "spread": False, "prescale_lead_s": 0}))
    out = evaluate(s, svc, now, reason="created")
    assert [d.nodes for d in out.decisions] == [["eu-a"]] * 3


def test_a_same_rack_gang_goes_to_the_rack_of_its_best_whole_gang():
    # racks are (site, rack): eu's r1 and us's r1 are two racks (issue 27 finding 4: they were one,
    # and a gang "in one rack" spanned two regions); eu-c joins eu's r1 beside eu-a
    now = time.time()
    s = world(now)
    s.inv.put(b"eu-c", gpu_node("eu-c", now, fp16=1500.0, region="eu", rack="r1", tier="centre"))
    free = task("free", cards=8, peers=2)
    assert sorted(s.decide(free, now).nodes) == ["eu-a", "us-a"]  # the two best, in two regions
    s.end("free")
    d = s.decide(task("r2", cards=8, peers=2, constraints={"same_rack": True}), now)
    # eu/r1 holds eu-a (2000) and eu-c (1500); every other rack has one node: eu/r1 it is
    assert sorted(d.nodes) == ["eu-a", "eu-c"] and d.rejected_counts == {"outside_the_gangs_rack": 3}
    s.end("r2")
    s.decide(task("blocker", cards=8), now)  # eu-a is full: no rack can hold a whole gang any more
    d = s.decide(task("r3", cards=8, peers=2, constraints={"same_rack": True}), now)
    assert d.status == "unschedulable" and d.nodes == []


def test_racks_of_one_name_in_two_sites_are_two_racks_in_the_path_table():
    # rack-level probes: rack:eu/r1 -> rack:us/r1 is a slow path between regions; inside eu/r1 it is
    # fast. With unscoped names both racks were "rack:r1" and looked 0.05 ms apart.
    now = time.time()
    reports = [gpu_node(n, now, region=reg, rack=rack) for n, (reg, rack, _, _) in NODES.items()]
    paths = {("rack:eu/r1", "rack:eu/r1"): {"rtt_ms": win(now, 0.05)},
             ("rack:eu/r1", "rack:us/r1"): {"rtt_ms": win(now, 90.0)},
             ("rack:us/r1", "rack:us/r1"): {"rtt_ms": win(now, 0.05)}}
    s = make_scheduler(reports, paths)
    nodes = s.nodes(now)
    assert nodes.racks[nodes.index["eu-a"]] == "rack:eu/r1" and nodes.racks[nodes.index["us-a"]] == "rack:us/r1"
    p95 = s.path_table(nodes, "balanced").gather("p95", ["eu-a"], len(nodes.ids))[0]
    assert p95[nodes.index["us-a"]] == 90.0 and np.isnan(p95[nodes.index["eu-b"]])
    # a rack probed by its unscoped name counts where that name is one rack only (r2 is in both
    # regions: ambiguous, ignored; a rack named x exists in eu only)
    s.inv.put(b"eu-x", gpu_node("eu-x", now, region="eu", rack="x"))
    s.net.put(b"rack:x|rack:x", {"src": "rack:x", "dst": "rack:x", "metrics": {"rtt_ms": win(now, 0.07)}})
    s.net.put(b"rack:r2|rack:r2", {"src": "rack:r2", "dst": "rack:r2", "metrics": {"rtt_ms": win(now, 0.07)}})
    nodes = s.nodes(now)
    table = s.path_table(nodes, "balanced")
    assert table.gather("p95", ["eu-x"], len(nodes.ids))[0][nodes.index["eu-x"]] == 0.07
    assert np.isnan(table.gather("p95", ["eu-b"], len(nodes.ids))[0][nodes.index["us-b"]])


def test_best_group_is_the_highest_total_of_k_fitting_nodes():
    scores = np.array([90.0, 80.0, 85.0, 84.0, -np.inf])
    groups = np.array([0, 0, 1, 1, 1])
    fits = np.array([True, True, True, True, True])
    assert best_group(scores, groups, fits, 2) == 0  # 90 + 80 = 170 beats 85 + 84 = 169
    # node 1 does not fit: group 0 has one node left, group 1 holds the gang
    assert best_group(scores, groups, fits & np.array([True, False, True, True, True]), 2) == 1
    assert best_group(scores, groups, fits, 3) is None  # group 1's third node is infeasible
    assert best_group(np.array([]), np.array([], np.int64), np.array([], bool), 1) is None


def test_a_move_keeps_the_constraints():
    now = time.time()
    s = world(now)
    t = task("stay", constraints={"regions": ["eu"]})
    scores = np.array([50.0, 40.0, 99.0, 98.0])  # the us nodes would be worth more
    out = masked(s.running, t, s.nodes(now), s.nodes(now).usable, scores)
    assert out.tolist() == [50.0, 40.0, -np.inf, -np.inf]
    assert masked(s.running, task("free"), s.nodes(now), s.nodes(now).usable, scores) is scores


def test_preemption_clears_room_only_where_the_constraints_allow():
    now = 1_000_000.0
    s = world(now)
    s.node_timeout_s = float("inf")
    where = {}
    for k in range(4):  # every node full of low-priority work
        where[f"low{k}"] = s.decide(Task(id=f"low{k}", type="fine-tune", priority=10, resources={"cards": 8}),
                                    now).nodes[0]
    assert sorted(where.values()) == sorted(NODES)
    # an urgent task that may run in the us only takes a us node's work, never an eu one's (eu-a,
    # the strongest, would be its first choice otherwise)
    d = s.decide(task("urgent", cards=8, priority=90, preempts=True, constraints={"regions": ["us"]}), now + 60)
    assert d.status == "placed" and d.nodes[0].startswith("us-")
    (p,) = s.preemptions
    assert where[p.task_id] == d.nodes[0]


def test_a_gang_stays_in_one_slurm_cluster():
    # two Slurm clusters (each site's bridge names its own in its reports): eu-a and us-a are the two
    # best nodes, so a free gang of two would take them across clusters; Slurm runs a job in one cluster
    now = time.time()
    reports = [gpu_node(n, now, fp16=f, region=reg, rack=rack, slurm_cluster=reg)
               for n, (reg, rack, _, f) in NODES.items()]
    s = make_scheduler(reports, {(n, "hub"): {"rtt_ms": win(now, 1.0)} for n in NODES})
    d = s.decide(task("g", cards=8, peers=2), now)
    # us-a + us-b (1900 + 1800) beat eu-a + eu-b (2000 + 1000)
    assert sorted(d.nodes) == ["us-a", "us-b"] and d.rejected_counts == {"outside_the_gangs_cluster": 2}
    assert s.decide(task("one", cards=8), now).nodes == ["eu-a"]  # one node: any cluster
    d = s.decide(task("g2", cards=8, peers=2), now)  # eu-b alone is left whole: no cluster holds it
    assert d.status == "unschedulable" and d.rejected_counts.get("outside_the_gangs_cluster") == 1
    # a move of a gang keeps to one cluster too
    t = task("mv", cards=8, peers=2)
    out = masked(s.running, t, s.nodes(now), np.full((4, 3), 8.0, np.float32), np.array([50.0, 40.0, 99.0, 98.0]))
    assert out.tolist() == [-np.inf, -np.inf, 99.0, 98.0]
