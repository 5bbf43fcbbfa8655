"""Issue 30: the headline's statistics — t-intervals over seeds, per job kind, wait and run apart,
paired ratios, the top ten's share, only completed work counted — and runs in processes give the
same results as one after another."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from core.intervals import t975, t_interval
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.jobs import SimJobs
from streams.replay.results import replay
from streams.replay.stats import compare, headline, kind_mask
from streams.replay.traces import JobTrace, SitePaths
from streams.replay.world import SimConfig


def test_t_quantiles_match_the_distribution():
    stats = pytest.importorskip("scipy.stats")
    for df in list(range(1, 60)) + [100, 1000]:
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=2e-4), df
    with pytest.raises(ValueError):
        t975(0)


def test_t_interval_worked_example_and_edges():
    # 1..5: mean 3, sd 1.5811, se 0.7071, t(4) 2.7764: half-width 1.9632
    m, lo, hi = t_interval([1, 2, 3, 4, 5, np.nan])
    assert (m, lo, hi) == (3.0, pytest.approx(1.0368, abs=1e-4), pytest.approx(4.9632, abs=1e-4))
    assert t_interval([7.0, 7.0, 7.0]) == (7.0, 7.0, 7.0)  # constant: no width
    m, lo, hi = t_interval([2.0])
    assert m == 2.0 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in t_interval([]))


def jobs_of(nodes, home, completed, submit=None) -> SimJobs:
    n = len(nodes)
    z = np.zeros(n)
    return SimJobs(np.zeros(n) if submit is None else np.array(submit, float), z + 100, np.array(nodes),
                   np.ones(n, np.int64), z, np.array(home), z, ["fine-tune"] * n, None, z + 100,
                   np.array(completed, bool))


def outcome(start, end, load=None):
    return SimpleNamespace(start=np.array(start, float), end=np.array(end, float),
                           load_s=None if load is None else np.array(load, float))


def test_compare_worked_example():
    # 4 jobs: a gang, a data job, two others; job 3 did not complete (left out)
    jobs = jobs_of([2, 1, 1, 1], [-1, 0, -1, -1], [True, True, True, False])
    assert kind_mask(jobs, "gang").tolist() == [True, False, False, False]
    assert kind_mask(jobs, "data").tolist() == [False, True, False, False]
    assert kind_mask(jobs, "other").tolist() == [False, False, True, True]
    run = SimpleNamespace(seeds=(0, 1), policies=("ours", "topology"), jobs={0: jobs, 1: jobs}, outcomes={
        # seed 0: ours jct 50, 100, 300 (and 999 for the uncounted job); topology 100, 100, 300
        ("ours", 0): outcome([10, 0, 0, 0], [50, 100, 300, 999], load=[0, 20, 0, 0]),
        ("topology", 0): outcome([0, 0, 0, 0], [100, 100, 300, 1], load=[0, 40, 0, 0]),
        # seed 1: ours 100, 100, 300; topology 100, 100, 300 (no change)
        ("ours", 1): outcome([0, 0, 0, 0], [100, 100, 300, 5]),
        ("topology", 1): outcome([0, 0, 0, 0], [100, 100, 300, 5])})
    r = compare(run, "ours", "topology", "all", "jct")
    # per seed: mean 150 / 166.67 - 1 = -0.1, and 0; mean -0.05; sd 0.0707, se 0.05, t(1) 12.706
    assert r["change"] == pytest.approx(-0.05)
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(-0.05 - 12.7062 * 0.05), pytest.approx(-0.05 + 12.7062 * 0.05))
    assert r["jobs"] == 3 and r["seeds"] == 2
    assert r["mean_policy_s"] == pytest.approx(950 / 6) and r["mean_against_s"] == pytest.approx(1000 / 6)
    assert r["paired_median"] == 1.0  # per-job ratios 0.5, 1, 1, 1, 1, 1
    assert r["top10_share"] == pytest.approx(1.0)  # seed 0: all of the 50 s is one job; seed 1: 0/0 left out
    wait = compare(run, "ours", "topology", "all", "wait")
    assert math.isnan(wait["change"])  # topology waited 0: no ratio of means
    assert wait["paired_median"] == 0.0 and wait["mean_policy_s"] == pytest.approx(10 / 6)
    run_time = compare(run, "ours", "topology", "gang", "run")  # gang only: 40 vs 100, then 100 vs 100
    assert run_time["change"] == pytest.approx((-0.6 + 0.0) / 2) and run_time["jobs"] == 1
    # its t-interval: -0.3 -/+ 12.7062 x 0.3 reaches -4.1, below what a time can fall: held at -100 %
    assert (run_time["ci_low"], run_time["ci_high"]) == (-1.0, pytest.approx(-0.3 + 12.7062 * 0.3))
    assert compare(run, "ours", "topology", "data", "jct")["change"] == 0.0
    # the data job's load: 20 s against 40 s in seed 0 (-50 %), none recorded in seed 1 (0 against 0:
    # no ratio, left out of the mean); paired: the median difference of -20 and 0
    load = compare(run, "ours", "topology", "data", "load")
    assert load["change"] == pytest.approx(-0.5) and load["paired_median"] == pytest.approx(-10.0)
    rows = headline(run)
    assert {(x["kind"], x["metric"]) for x in rows} == {(k, m) for k in ("gang", "data", "other", "all")
                                                         for m in ("jct", "wait", "run")} | {("data", "load")}


def test_runs_in_processes_give_the_same_results():
    rng = np.random.default_rng(4)
    n = 24
    nodes = np.where(rng.random(n) < 0.3, 2, 1)
    t = JobTrace("test", np.sort(rng.uniform(0, 8000, n)), rng.uniform(200, 4000, n), nodes * 8, nodes,
                 [f"u{i % 5}" for i in range(n)], ["Pass"] * n)
    rtt = np.array([[0, 30.0], [30.0, 0]])
    paths = SitePaths(["a", "b"], rtt, rtt, rtt, rtt * 0, np.array([[np.nan, 5.0], [5.0, np.nan]]))
    spec = ClusterSpec(sites=2, racks_per_site=2, nodes_per_rack=2)
    cfg = SimConfig(cluster=spec, epoch_s=900.0)
    cluster = build_cluster(paths, spec)
    one = replay(t, cluster, cfg, ("ours", "topology"), seeds=(0, 1), workers=1)
    ticks = []
    two = replay(t, cluster, cfg, ("ours", "topology"), seeds=(0, 1), workers=2, tick=ticks.append)
    assert list(one.outcomes) == list(two.outcomes) and sum(ticks) == 4 * n
    for k, o in one.outcomes.items():
        np.testing.assert_array_equal(o.end, two.outcomes[k].end, err_msg=str(k))
        np.testing.assert_array_equal(o.start, two.outcomes[k].start, err_msg=str(k))


def test_each_ablation_takes_away_one_ingredient():
    from streams.replay.ablations import ABLATIONS, variant

    cfg = SimConfig(cluster=ClusterSpec(sites=4, racks_per_site=3))
    series = ["a series"]
    got = {name: variant(name, cfg, series) for name in ABLATIONS}
    assert got["as-is"] == (cfg, series, "ours")
    one, s, p = got["one-site"]
    assert (one.cluster.sites, one.cluster.racks_per_site, s, p) == (1, 12, None, "ours")  # same racks, no WAN
    assert got["no-data"][0].data_share == 0.0 and got["equal-cards"][0].fast_speed == 1.0
    assert got["static-network"][1] is None and got["static-network"][0] == cfg
    assert got["no-migrations"] == (cfg, series, "ours-static")
    assert got["oracle"][0].estimate == "oracle"
    assert got["no-predictions"] == (dataclasses.replace(cfg, predictions=False), series, "ours")


def test_simulate_ablations_prints_a_row_per_variant_and_refuses_unknown_names(tmp_path, capsys):
    from streams.cli.main import main

    jobs = tmp_path / "jobs.csv"
    rows = "".join(f"{i * 300},{600 + 50 * i},{8 * (1 + i % 2)},{1 + i % 2},u{i % 3},Pass,training-data-parallel\n"
                   for i in range(8))
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n" + rows)
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms,gbps\na,b,40,2\nb,a,40,2\n")
    base = ["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2",
            "--racks-per-site", "2", "--nodes-per-rack", "2", "--seeds", "2", "--workers", "1",
            "--rtt-dynamics", "none", "--epoch", "1800"]
    assert main([*base, "--ablations", "as-is,one-site,no-migrations", "--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    seen = {(r["ablation"], r["against"], r["kind"]) for r in out["ablations"]}
    assert {a for a, _, _ in seen} == {"as-is", "one-site", "no-migrations"}
    assert ("as-is", "topology", "all") in seen and ("no-migrations", "compute-only", "gang") in seen
    assert all(r["seeds"] == 2 for r in out["ablations"])
    assert main([*base, "--ablations", "no-gpus"]) == 2
    assert "unknown 'no-gpus'" in capsys.readouterr().err


def test_the_sweep_moves_one_assumed_parameter_at_a_time(tmp_path, capsys):
    from streams.cli.main import main
    from streams.replay.ablations import SWEEP, swept

    cfg = SimConfig()
    got = {name: swept(ch, cfg, None)[0] for name, ch in SWEEP}
    assert got["comm 0.1-0.5"] == cfg  # the default is one of the points
    assert (got["comm 0.3-0.7"].perf.comm_share_low, got["comm 0.3-0.7"].perf.comm_share_high) == (0.3, 0.7)
    assert got["grad 4 GB"].perf.grad_gb == 4.0 and got["grad 4 GB"].data_gb == cfg.data_gb
    assert got["data 2000 GB"].data_gb == 2000.0 and got["data 2000 GB"].perf == cfg.perf
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n"
                    + "".join(f"{i * 400},900,16,2,u{i},Pass,training-data-parallel\n" for i in range(4)))
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms,gbps\na,b,40,2\nb,a,40,2\n")
    assert main(["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites",
                 "2", "--racks-per-site", "2", "--nodes-per-rack", "2", "--seeds", "1", "--workers", "1",
                 "--rtt-dynamics", "none", "--epoch", "1800", "--sweep", "--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert {r["ablation"] for r in out["sweep"]} == {name for name, _ in SWEEP}


def test_the_top_ten_share_is_of_absolute_differences():
    # 12 jobs: job 0 gains 100 s, job 1 loses 100 s, jobs 2-11 gain 1 s each: absolute differences
    # 100 + 100 + 10 x 1 = 210; the ten largest 100 + 100 + 8 = 208: 99.0 % (a signed share would be
    # 8 / -10: meaningless)
    n = 12
    jobs = jobs_of([1] * n, [-1] * n, [True] * n)
    ours = outcome([0] * n, [900, 1100] + [999] * 10)
    run = SimpleNamespace(seeds=(0,), policies=("ours", "topology"), jobs={0: jobs},
                          outcomes={("ours", 0): ours, ("topology", 0): outcome([0] * n, [1000] * n)})
    assert compare(run, "ours", "topology", "all", "jct")["top10_share"] == pytest.approx(208 / 210)
