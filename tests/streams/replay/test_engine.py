"""The replay (issue 13): the same seed gives the same results; invariants hold on random small
traces; a planted case where the network-aware choice must win and one where it must not matter;
bad input exits 2 with one line."""

import dataclasses
import json
import math

import numpy as np
import pytest

from core.jobperf import PerfModel
from core.placement import topology_pick
from streams.cli.main import main
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.engine import DEFAULT_POLICIES, POLICIES, Replay
from streams.replay.jobs import sim_jobs
from streams.replay.results import changes, replay, summary
from streams.replay.traces import JobTrace, SitePaths
from streams.replay.world import SimConfig, network_events
from tests.helpers.data import needs_data, skyplane_network

QUIET = dict(reroutes_per_day=0.0, bursts_per_day=0.0, failures_per_node_day=0.0)


def two_sites(rtt_ms=200.0, gbps=1.0) -> SitePaths:
    rtt = np.array([[0.0, rtt_ms], [rtt_ms, 0.0]])
    g = np.array([[np.nan, gbps], [gbps, np.nan]])
    return SitePaths(["east", "west"], rtt, rtt, rtt, np.zeros((2, 2)), g)


def trace(submit, dur, gpus, nodes, users=None) -> JobTrace:
    n = len(submit)
    return JobTrace("test", np.array(submit, float), np.array(dur, float), np.array(gpus), np.array(nodes),
                    users or [f"u{i}" for i in range(n)], ["Pass"] * n)


def random_trace(rng, n=40) -> JobTrace:
    nodes = np.where(rng.random(n) < 0.3, rng.integers(2, 5, n), 1)
    gpus = nodes * rng.choice([1, 2, 4, 8], n)
    return trace(np.sort(rng.uniform(0, 20_000, n)), rng.uniform(60, 20_000, n), gpus, nodes)


SPEC = ClusterSpec(sites=2, racks_per_site=2, nodes_per_rack=2, cards_per_node=8)


def test_the_same_seed_gives_identical_results():
    rng = np.random.default_rng(1)
    t = random_trace(rng, 20)
    cluster = build_cluster(two_sites(20.0, 5.0), SPEC)
    cfg = SimConfig(cluster=SPEC, failures_per_node_day=2.0, reroutes_per_day=4.0, bursts_per_day=4.0, epoch_s=1800.0)
    a = replay(t, cluster, cfg, POLICIES, seeds=(0, 1))
    b = replay(t, cluster, cfg, POLICIES, seeds=(0, 1))
    for key, o in a.outcomes.items():
        np.testing.assert_array_equal(o.end, b.outcomes[key].end, err_msg=str(key))
        assert o.state == b.outcomes[key].state
    assert summary(a, 64) == summary(b, 64)
    # a different seed draws other shares, homes, probes and events
    c = replay(t, cluster, dataclasses.replace(cfg, seed=5), ("ours",), seeds=(7,))
    assert not np.array_equal(c.outcomes[("ours", 7)].end, a.outcomes[("ours", 0)].end)


@pytest.mark.parametrize("seed", range(4))
def test_invariants_hold_on_random_small_traces(seed):
    rng = np.random.default_rng(100 + seed)
    t = random_trace(rng, 30)
    cluster = build_cluster(two_sites(float(rng.uniform(5, 50)), 5.0), SPEC)
    cfg = SimConfig(cluster=SPEC, seed=seed, failures_per_node_day=3.0, reroutes_per_day=6.0, bursts_per_day=6.0,
                    epoch_s=1800.0)
    jobs = sim_jobs(t, cluster, cfg)
    events = network_events(cfg, 2, len(cluster.node_ids), float(jobs.submit.max() + 3 * jobs.ideal.max()))
    for policy in POLICIES:
        o = Replay(jobs, cluster, cfg, policy, events).run()  # raises InvariantError on a broken invariant
        assert all(s in ("finished", "failed", "unschedulable") for s in o.state), policy
        assert all(o.reason[j] for j in range(len(jobs)) if o.state[j] != "finished")
        done = np.array([s == "finished" for s in o.state])
        # nothing finishes before it was submitted plus its work on the fastest card
        assert (o.end[done] >= jobs.submit[done] + jobs.ideal[done] / cfg.fast_speed - 1e-6).all(), policy
        assert (o.start[done] >= jobs.submit[done]).all()


def test_planted_a_gang_far_apart_loses_time_the_network_aware_choice_saves():
    # the fast cards sit in rack 0 of each site, 200 ms apart; a 4-node job communicating half its
    # time: compute-only takes the four fast nodes across the sites, ours one site's four nodes
    t = trace([0.0], [10_000.0], [32], [4])
    cluster = build_cluster(two_sites(200.0, 1.0), SPEC)
    cfg = SimConfig(cluster=SPEC, perf=PerfModel(comm_share_low=0.5, comm_share_high=0.5), data_share=0.0, **QUIET)
    run = replay(t, cluster, cfg, ("ours", "compute-only", "topology"))
    ours, co = run.outcomes[("ours", 0)], run.outcomes[("compute-only", 0)]
    # ours: one site, two racks (0.2 ms, uplink share): about (0.5 / slow card... ) the ideal;
    # compute-only: 200 ms and 1 Gbit/s between members: many times the ideal
    assert ours.end[0] < 2 * 10_000
    assert co.end[0] > 10 * 10_000
    (c,) = [x for x in changes(run) if x["policy"] == "ours" and x["against"] == "compute-only"
            and x["class"] == "sensitive"]
    assert c["jct_change"] < -0.8


def test_planted_single_node_jobs_on_equal_cards_do_not_care_about_the_network():
    rng = np.random.default_rng(3)
    t = trace(np.sort(rng.uniform(0, 5000, 12)), rng.uniform(100, 3000, 12), [8] * 12, [1] * 12)
    cluster = build_cluster(two_sites(), SPEC)
    cfg = SimConfig(cluster=SPEC, fast_speed=1.0, data_share=0.0, **QUIET)
    run = replay(t, cluster, cfg, POLICIES)
    jct = {p: run.outcomes[(p, 0)].end - t.submit_s for p in POLICIES}
    for p in POLICIES:  # 8 nodes for 12 jobs arriving apart: everybody's time is the trace's
        np.testing.assert_allclose(jct[p], t.duration_s, rtol=1e-9, err_msg=p)


def test_topology_pick_prefers_one_rack_then_one_site():
    ok = np.arange(8)
    site = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    rack = np.array([0, 0, 1, 1, 2, 2, 2, 3])
    assert topology_pick(ok, 2, site, rack) == [0, 1]  # rack 0 fits exactly (best fit before rack 2)
    assert topology_pick(ok, 3, site, rack) == [4, 5, 6]  # only rack 2 holds three
    assert topology_pick(ok, 4, site, rack) == [0, 1, 2, 3]  # no rack holds four: the best-fitting site
    # no site holds six: the best-stocked sites and racks first (rack 2's three, then rack 0's or 1's)
    six = topology_pick(ok, 6, site, rack)
    assert len(six) == 6 and {4, 5, 6} <= set(six)


@needs_data
def test_simulate_bad_input_exits_2_with_one_line(tmp_path, capsys):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n0,10,8,1,a,Pass,fine-tune\n5,-3,8,1,a,Pass,fine-tune\n")
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms\na,b,10\nb,a,10\n")
    cases = [
        (["--jobs", f"slurm:{jobs}"], "unknown trace format"),
        (["--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2"], "row 3: duration_s"),
        (["--jobs", f"generic:{tmp_path / 'none.csv'}", "--network", f"generic:{net}"], "cannot read"),
        (["--policies", "ours,lifo"], "unknown 'lifo'"),
    ]
    for argv, words in cases:
        assert main(["simulate", "--no-store", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err, (argv, err)
    # a site the jobs name that the network lacks; a job larger than the cluster
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type,data_gb,data_site\n"
                    "0,10,8,1,a,Pass,fine-tune,10,mars\n")
    assert main(["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}",
                 "--sites", "2"]) == 2
    assert "'mars'" in capsys.readouterr().err
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n0,10,8,400,a,Pass,fine-tune\n")
    assert main(["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}",
                 "--sites", "2"]) == 2
    assert "needs 400 nodes" in capsys.readouterr().err


@needs_data
def test_simulate_stores_queryable_tables(tmp_path, monkeypatch, capsys):
    import duckdb

    jobs = tmp_path / "jobs.csv"
    rows = "".join(f"{i * 50},{300 + i},{8 * (1 + i % 2)},{1 + i % 2},u{i % 3},Pass,training-data-parallel\n"
                   for i in range(10))
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n" + rows)
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms,gbps\na,b,40,2\nb,a,40,2\n")
    db, live = tmp_path / "sim.duckdb", tmp_path / "live.duckdb"
    monkeypatch.setenv("CNSCHED_REPLAY_DUCKDB_PATH", str(db))
    monkeypatch.setenv("CNSCHED_DUCKDB_PATH", str(live))  # the live audit: a replay never writes there
    assert main(["simulate", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2",
                 "--racks-per-site", "2", "--nodes-per-rack", "2", "--seeds", "2", "--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    con = duckdb.connect(str(db), read_only=True)
    n_jobs = con.execute("SELECT count(*) FROM sim_jobs WHERE run_id = ?", [out["run_id"]]).fetchone()[0]
    assert n_jobs == 10 * 2 * len(DEFAULT_POLICIES)
    got = con.execute("SELECT policy, class, jct_mean_s FROM sim_runs WHERE run_id = ? ORDER BY 1, 2",
                      [out["run_id"]]).fetchall()
    want = sorted((r["policy"], r["class"], r["jct_mean_s"]) for r in out["summary"])
    assert [(p, c) for p, c, _ in got] == [(p, c) for p, c, _ in want]
    assert all(math.isclose(a[2], b[2]) for a, b in zip(got, want, strict=True) if not math.isnan(b[2]))
    assert con.execute("SELECT count(*) FROM sim_changes WHERE run_id = ?", [out["run_id"]]).fetchone()[0] > 0
    assert out["db"] == str(db) and not live.exists()


def test_replay_of_the_real_philly_trace_over_skyplane_holds_its_invariants():
    from tests.streams.replay.test_traces import DATA

    if not DATA.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    from streams.replay.traces import head, load_philly, load_skyplane

    t = head(load_philly(DATA / "jobs" / "philly" / "philly_data_training.csv"), 120)
    sky = DATA / "network" / "skyplane"
    cluster = build_cluster(load_skyplane(sky / "latency.csv.gz", sky / "throughput.csv.gz"), ClusterSpec())
    cfg = SimConfig(cluster=ClusterSpec(), epoch_s=3600.0)
    run = replay(t, cluster, cfg, ("ours", "compute-only", "topology"))  # InvariantError if one breaks
    for o in run.outcomes.values():
        assert set(o.state) <= {"finished", "failed", "unschedulable"} and o.state.count("finished") >= 110
    rows = {(r["policy"], r["class"]): r for r in summary(run, len(cluster.node_ids) * 8)}
    assert rows[("ours", "all")]["jobs"] + rows[("ours", "all")]["failed"] + rows[("ours", "all")]["unschedulable"] == 120


def test_simulate_without_the_shared_data_says_what_to_pass(tmp_path, monkeypatch, capsys):
    """Issue 51, finding 10: on a clone without ../shared the README's command said nothing useful."""
    import streams.cli.simulate as sim

    monkeypatch.setattr(sim, "DATA", tmp_path / "nowhere")
    assert main(["simulate", "--no-store"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"({tmp_path / 'nowhere'}), which is not there: pass --jobs philly:PATH" in err


def test_simulate_experiment_runs_each_world_with_its_options(tmp_path, capsys):
    # issue 53's presets: e1's two worlds, e2's three data sizes (ablations at the largest)
    rows = ["submit_s,duration_s,gpus,nodes,user,status,type"]
    rows += [f"{10 * i},600,8,1,u{i},Pass,training-data-parallel" for i in range(16)] + ["5,600,16,2,g,Pass,fine-tune"]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    common = ["simulate", "--jobs", f"generic:{tmp_path / 't.csv'}", "--seeds", "1", "--workers", "1", "--json",
              "--no-store", "--rtt-dynamics", "none", "--network", skyplane_network(tmp_path)]
    assert main([*common, "--experiment", "e1", "--policies", "ours,topology"]) == 0
    e1 = json.loads(capsys.readouterr().out)
    assert [(w["world"], w["result"]["config"]["cluster.sites"], w["result"]["config"]["cluster.nodes_per_rack"],
             w["result"]["config"]["cluster.regions"]) for w in e1["worlds"]] == \
        [("spanning world", 21, 2, "random"), ("fitting world", 8, 16, "random")]
    assert main([*common, "--experiment", "e2"]) == 0
    e2 = json.loads(capsys.readouterr().out)
    assert [w["world"] for w in e2["worlds"]] == ["data 15 GB", "data 100 GB", "data 500 GB"]
    assert sorted({r["ablation"] for r in e2["worlds"][2]["result"]["ablations"]}) == ["as-is", "no-reuse", "no-staging"]
    # the data size applies: the locality-blind baseline's data jobs load 500 GB far longer than 15 GB
    blind = [next(r["mean_against_s"] for r in w["result"]["ablations"] if (r["against"], r["kind"], r["metric"]) ==
                  ("compute-only", "data", "load")) for w in e2["worlds"]]
    assert blind[0] < blind[1] < blind[2] and blind[2] > 10 * blind[0]
