"""Issue 30: every policy shares one queue and sees a duration estimate a real cluster has, never the
trace's (the oracle only as an ablation); the topology baseline is the one an operator configures;
ties between sites fall by the seed, never by a site's name."""

import dataclasses

import numpy as np
import pytest

from core.estimates import like_completed, limit_factors, requested_limits
from core.jobperf import PerfModel
from core.placement import topology_scores
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.engine import SCHEDULED
from streams.replay.jobs import sim_jobs
from streams.replay.results import replay
from streams.replay.traces import JobTrace, SitePaths
from streams.replay.world import SimConfig

QUIET = dict(reroutes_per_day=0.0, bursts_per_day=0.0, failures_per_node_day=0.0)


def trace(submit, dur, gpus, nodes) -> JobTrace:
    n = len(submit)
    return JobTrace("test", np.array(submit, float), np.array(dur, float), np.array(gpus), np.array(nodes),
                    [f"u{i}" for i in range(n)], ["Pass"] * n)


def sites(names, rtt, gbps) -> SitePaths:
    rtt, gbps = np.array(rtt, float), np.array(gbps, float)
    return SitePaths(list(names), rtt, rtt, rtt, np.zeros_like(rtt), gbps)


# ------------------------------------------------------------------ estimates
def test_requested_limits_round_up_to_the_values_users_pick():
    # 100 s x 1 -> 5 min; 301 s -> 10 min; 3,600 s x 1.1 = 3,960 s -> 90 min; 1 h exactly stays 1 h;
    # 10,000 s x 1 -> 3 h; past a week (604,800 s): whole days (604,801 s -> 8 days)
    got = requested_limits([100, 301, 3600, 3600, 10_000, 604_801], [1, 1, 1.1, 1, 1, 1])
    np.testing.assert_array_equal(got, [300, 600, 5400, 3600, 10_800, 8 * 86_400])
    assert requested_limits([], []).size == 0
    assert np.isnan(requested_limits([np.nan], [2.0])[0])
    r = np.random.default_rng(0).uniform(1, 1e6, 1000)
    f = limit_factors(1000, 5.0, 3)
    assert (requested_limits(r, f) >= r * f).all()  # never below what was asked
    assert (f >= 1).all() and (f <= 5).all() and np.array_equal(f, limit_factors(1000, 5.0, 3))
    with pytest.raises(ValueError):
        limit_factors(3, 0.5, 0)


def test_a_failing_jobs_limit_is_a_completed_jobs_of_its_shape_never_its_own():
    # jobs 0-2 completed (limits 600, 1,200 s of shape 8; 5,400 s of shape 16); 3 (shape 8) and 4
    # (shape 16) failed early, their own limits 300 s; 5 failed with a shape no completed job has; 6
    # (shape 8) was killed after a day: it asked for at least that (its own 86,400 s), never less
    limits = [600.0, 1200.0, 5400.0, 300.0, 300.0, 300.0, 86400.0]
    done = [True, True, True, False, False, False, False]
    got = like_completed(limits, done, [8, 8, 16, 8, 16, 32, 8], seed=7)
    np.testing.assert_array_equal(got[:3], limits[:3])
    assert got[3] in (600.0, 1200.0) and got[4] == 5400.0 and got[5] in (600.0, 1200.0, 5400.0)
    assert got[6] == 86400.0
    np.testing.assert_array_equal(got, like_completed(limits, done, [8, 8, 16, 8, 16, 32, 8], seed=7))
    assert like_completed([1.0, 2.0], [True, True], [1, 1], 0).tolist() == [1.0, 2.0]
    # in the replay: a failed job of the trace is told a completed one's limit
    t = trace([0, 1], [3600.0, 10.0], [8, 8], [1, 1])
    t = dataclasses.replace(t, status=["Pass", "Failed"])
    cluster = build_cluster(sites(["a", "b"], [[0, 5], [5, 0]], [[np.nan, 10], [10, np.nan]]),
                            ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1))
    jobs = sim_jobs(t, cluster, SimConfig(cluster=cluster.spec, limit_factor=1.0))
    np.testing.assert_array_equal(jobs.estimate, [3600.0, 3600.0])  # not 5 min


def test_the_queue_is_told_the_estimate_and_the_oracle_only_when_asked():
    t = trace([0, 1], [1000.0, 50.0], [8, 8], [1, 1])
    cluster = build_cluster(sites(["a", "b"], [[0, 5], [5, 0]], [[np.nan, 10], [10, np.nan]]),
                            ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1))
    limit = sim_jobs(t, cluster, SimConfig(cluster=cluster.spec, limit_factor=1.0))
    np.testing.assert_array_equal(limit.estimate, [1200.0, 300.0])  # 20 min, 5 min
    oracle = sim_jobs(t, cluster, SimConfig(cluster=cluster.spec, estimate="oracle"))
    np.testing.assert_array_equal(oracle.estimate, oracle.ideal)
    with pytest.raises(ValueError):
        SimConfig(estimate="psychic")


@pytest.mark.parametrize("policy", [p for p in SCHEDULED if p != "ours-quotas"])
def test_an_oracle_would_backfill_where_the_estimate_must_not(policy):
    # one site of 4 nodes. A (2 nodes, 10,000 s) runs; B (all 4 nodes) heads the queue with a
    # reservation from A's expected end; C (1 node, 9,000 s) could backfill on a free node only if
    # it ends before that. The oracle knows A ends at 10,000 and C at 9,002: C starts at once. Told
    # the requested limits (factor 1: A 3 h, C 3 h), C would end at 10,802, past A's 10,800: it
    # waits for B, which starts when A really ends (10,000) and runs 1,000 s.
    spec = ClusterSpec(sites=1, racks_per_site=2, nodes_per_rack=2)
    cluster = build_cluster(sites(["solo"], [[0.0]], [[np.nan]]), spec)
    t = trace([0, 1, 2], [10_000.0, 1000.0, 9000.0], [16, 32, 8], [2, 4, 1])
    base = SimConfig(cluster=spec, fast_speed=1.0, data_share=0.0, limit_factor=1.0,
                     perf=PerfModel(comm_share_low=0.0, comm_share_high=0.0), **QUIET)
    starts = {}
    for est in ("oracle", "limit"):
        o = replay(t, cluster, dataclasses.replace(base, estimate=est), (policy,)).outcomes[(policy, 0)]
        assert o.state == ["finished"] * 3, (est, o.reason)
        starts[est] = o.start
    assert starts["oracle"][2] == pytest.approx(2.0)
    if policy == "oracle-ect":  # the upper reference is told each job's true run whatever the others are told
        assert starts["limit"][2] == pytest.approx(2.0)
        return
    assert starts["limit"][1] == pytest.approx(10_000.0)
    assert starts["limit"][2] >= 11_000.0 - 1e-6


# ------------------------------------------------------------ topology baseline
SITE = np.array([0, 0, 0, 0, 1, 1, 1, 1])
RACK = np.array([0, 0, 1, 1, 2, 2, 3, 3])


def chosen(scores, k):
    idx = np.flatnonzero(np.isfinite(scores))
    return sorted(int(i) for i in idx[np.argsort(-scores[idx], kind="stable")][:k])


def test_topology_places_a_gang_in_one_rack_then_one_site_never_across():
    fits = np.array([1, 0, 1, 1, 1, 1, 1, 0], bool)
    left, speed = np.zeros(8), np.zeros(8)
    # racks holding 2: rack 1 (2 fit) and rack 2 (2 fit): equal fit, rack 1 has the lowest node (2)
    assert chosen(topology_scores(fits, 2, SITE, RACK, -1, left, speed), 2) == [2, 3]
    # with the data at site 1: rack 2
    s = topology_scores(fits, 2, SITE, RACK, 1, left, speed)
    assert chosen(s, 2) == [4, 5] and np.isinf(s[[0, 2, 3, 6]]).all()
    # 3 workers: no rack holds them; site 0 holds 3 (0, 2, 3), site 1 holds 3 (4, 5, 6): site 0 by its lowest node
    assert chosen(topology_scores(fits, 3, SITE, RACK, -1, left, speed), 3) == [0, 2, 3]
    # 4 workers: only across sites: it waits
    assert np.isinf(topology_scores(fits, 4, SITE, RACK, -1, left, speed)).all()
    assert np.isinf(topology_scores(np.zeros(8, bool), 1, SITE, RACK, -1, left, speed)).all()
    assert topology_scores(np.zeros(0, bool), 1, SITE[:0], RACK[:0], -1, left[:0], speed[:0]).size == 0


def test_topology_single_node_order_data_then_speed_then_best_fit():
    fits = np.ones(8, bool)
    speed = np.array([50, 50, 100, 100, 50, 50, 100, 100], float)
    left = np.array([4, 0, 6, 2, 0, 0, 2, 7], float)
    # data at site 1: 4-7 first; faster 6, 7; best fit: 6 (2 left) before 7 (7 left)
    s = topology_scores(fits, 1, SITE, RACK, 1, left, speed)
    assert list(np.argsort(-s, kind="stable")[:4]) == [6, 7, 4, 5]
    # no data: fast 2, 3, 6, 7 first; best fit 3 and 6 (2 left); the rack with fewer fitting nodes
    # (all equal here) then the lower index: 3
    s = topology_scores(fits, 1, SITE, RACK, -1, left, speed)
    assert list(np.argsort(-s, kind="stable")[:4]) == [3, 6, 2, 7]


def test_topology_order_does_not_depend_on_the_codes():
    rng = np.random.default_rng(5)
    for _ in range(50):
        fits = rng.random(8) < 0.7
        left, speed = rng.integers(0, 3, 8).astype(float), rng.integers(0, 2, 8).astype(float)
        gang = int(rng.integers(1, 4))
        perm_site, perm_rack = rng.permutation(2), rng.permutation(4)  # other codes for the same groups
        for home in (-1, 0, 1):
            a = topology_scores(fits, gang, SITE, RACK, home, left, speed)
            b = topology_scores(fits, gang, perm_site[SITE], perm_rack[RACK], perm_site[home] if home >= 0 else -1,
                                left, speed)
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ site names
def three(names):
    # every site equally measured (degree 2); throughput decides the pick order: the third (45 Gbit/s
    # each way in all), the second (35), the first (30)
    g = [[np.nan, 10, 20], [10, np.nan, 25], [20, 25, np.nan]]
    return sites(names, [[0, 30, 40], [30, 0, 50], [40, 50, 0]], g)


def physical_order(cluster):
    """The Scheduler's node order (ids sorted) as (measured-site position in the input, rack, node)."""
    pos = {n: i for i, n in enumerate(cluster.sites)}
    return [(pos[i.split("-", 1)[1].split(".r")[0]], i.split(".r", 1)[1]) for i in sorted(cluster.node_ids)]


def test_ties_between_sites_fall_by_the_seed_not_by_their_names():
    spec = ClusterSpec(sites=3, racks_per_site=1, nodes_per_rack=2)
    a = build_cluster(three(["east", "north", "west"]), spec)
    b = build_cluster(three(["zulu", "alpha", "mike"]), spec)  # the same measurements, names reordered
    assert a.sites == ["west", "north", "east"] and b.sites == ["mike", "alpha", "zulu"]  # by throughput
    firsts = set()
    for seed in range(8):
        oa, ob = physical_order(a.seeded(seed)), physical_order(b.seeded(seed))
        assert oa == ob  # the same physical order whatever the names
        firsts.add(oa[0][0])
    assert len(firsts) > 1  # and it moves with the seed


# ------------------------------------------------------------------ the data's place
def test_the_load_estimate_uses_the_path_from_the_store():
    from core.quality import path_bandwidth_gbps

    # 100 Gbit/s links, 40 % busy: 60 Gbit/s; 50 ms away: one 64 MiB window per round trip,
    # 64 x 2^20 x 8 / 0.05 = 10.74 Gbit/s; RTT unknown: the links'
    got = path_bandwidth_gbps(np.array([100.0, 100.0]), np.array([100.0]), np.array([0.6, 0.6]),
                              np.array([[50.0, np.nan]]))
    np.testing.assert_allclose(got, [[64 * 2**20 * 8 / 0.05 / 1e9, 60.0]], rtol=1e-6)


def test_a_data_job_goes_where_its_data_is_for_every_policy_that_knows_it(tmp_path):
    from streams.replay.traces import load_generic_jobs

    # equal cards at two sites 150 ms apart (2 Gbit/s); 500 GB at west. At west it loads over the
    # rack uplink's share (2 nodes x 100 / 4 = 50 Gbit/s): 80 s, 40 s more than the ideal 100 Gbit/s,
    # so it ends at 3,640; from east at 2 Gbit/s: 2,000 s, ending at 5,560. Every policy loads at
    # west: topology by its data-local rule, ours and compute-only (alpha 1: equal compute scores)
    # by the load score, which bounds the store's path by its RTT (before, it saw the same links
    # everywhere and compute-only loaded at east in every seed)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type,data_gb,data_site\n"
                    "0,3600,8,1,u,Pass,data-intensive,500,west\n")
    spec = ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=2)
    paths = sites(["east", "west"], [[0, 150.0], [150.0, 0]], [[np.nan, 2.0], [2.0, np.nan]])
    cfg = SimConfig(cluster=spec, fast_speed=1.0, **QUIET)
    t = load_generic_jobs(jobs)
    for seed in range(4):  # whichever site the seed puts first
        run = replay(t, build_cluster(paths, spec), cfg, ("ours", "topology", "compute-only"), seeds=(seed,))
        for p in ("ours", "topology", "compute-only"):
            assert run.outcomes[(p, seed)].end[0] == pytest.approx(3640.0), (p, seed)


def test_oracle_ect_is_ours_rule_told_the_truth():
    # gangs get their true communication share, every job its true run; no run-time prediction
    from streams.replay.engine import Replay

    spec = ClusterSpec(sites=1, racks_per_site=2, nodes_per_rack=2)
    cluster = build_cluster(sites(["solo"], [[0.0]], [[np.nan]]), spec)
    t = trace([0, 1], [5000.0, 300.0], [16, 8], [2, 1])
    jobs = sim_jobs(t, cluster, SimConfig(cluster=spec, **QUIET))
    r = Replay(jobs, cluster, SimConfig(cluster=spec, **QUIET), "oracle-ect", [])
    assert r.sched.comm_of == {"j0": float(jobs.comm[0])} and r.sched.durations is None
    assert r.sched.placement_rule == "seconds" and jobs.estimate[0] > jobs.ideal[0]
    seen = []
    decide = r.sched.decide
    r.sched.decide = lambda task, now: seen.append(task.expected_duration_s) or decide(task, now)
    assert r.run().state == ["finished"] * 2
    assert seen == [5000.0, 300.0]


def test_without_predictions_ours_plans_with_the_limits_as_topology_does():
    from streams.replay.engine import Replay

    spec = ClusterSpec(sites=1, racks_per_site=2, nodes_per_rack=2)
    cluster = build_cluster(sites(["solo"], [[0.0]], [[np.nan]]), spec)
    t = trace([0, 1], [5000.0, 300.0], [16, 8], [2, 1])
    cfg = SimConfig(cluster=spec, **QUIET)
    jobs = sim_jobs(t, cluster, cfg)
    assert Replay(jobs, cluster, cfg, "ours", []).sched.durations is not None
    assert Replay(jobs, cluster, dataclasses.replace(cfg, predictions=False), "ours", []).sched.durations is None
