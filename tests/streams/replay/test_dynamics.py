"""Issue 30: the network changes over time in the replay — the generic format's ``t_s`` is honoured
(each row a pair's values from then on) and real RTT series can drive every site pair."""

import numpy as np
import pytest

from core.jobperf import PerfModel, job_time
from streams.analytics.rtt_series import LabelledSeries
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.dynamics import from_rows, quantised, rtt_dynamics
from streams.replay.results import replay
from streams.replay.traces import JobTrace, TraceError, load_generic_network
from streams.replay.world import SimConfig, Truth

QUIET = dict(reroutes_per_day=0.0, bursts_per_day=0.0, failures_per_node_day=0.0)
PERF = PerfModel(comm_share_low=0.5, comm_share_high=0.5)


def network_csv(tmp_path, timed: bool):
    """Three sites; a<->b is 500 ms until second 1,000, then 5 ms; a<->c and b<->c stay 50 ms."""
    rows = ["t_s,src_site,dst_site,rtt_ms,gbps,loss"]
    for t, ab in ((0, 500.0), (1000, 5.0)):
        for x, y, v in (("a", "b", ab), ("a", "c", 50.0), ("b", "c", 50.0)):
            rows += [f"{t},{x},{y},{v},10,0", f"{t},{y},{x},{v},10,0"]
    text = "\n".join(rows) + "\n"
    if not timed:
        text = "\n".join(r.split(",", 1)[1] for r in text.splitlines()) + "\n"
    p = tmp_path / ("timed.csv" if timed else "flat.csv")
    p.write_text(text)
    return load_generic_network(p)


def test_a_pair_whose_rtt_falls_mid_run_wins_the_gang_that_comes_after(tmp_path):
    spec = ClusterSpec(sites=3, racks_per_site=1, nodes_per_rack=1)
    # two 2-node gangs: one at second 100 (a<->b at 500 ms; it ends before 1,000), one at second
    # 2,000 (a<->b at 5 ms)
    t = JobTrace("test", np.array([100.0, 2000.0]), np.array([100.0, 600.0]), np.array([16, 16]),
                 np.array([2, 2]), ["u0", "u1"], ["Pass"] * 2)
    cfg = SimConfig(cluster=spec, perf=PERF, fast_speed=1.0, data_share=0.0, epoch_s=60.0, **QUIET)
    jct = {}
    for timed in (True, False):
        paths = network_csv(tmp_path, timed)
        assert (paths.series is not None) == timed
        # the snapshot is the average either way: a<->b 252.5 ms
        assert paths.rtt_ms[0, 1] == pytest.approx(252.5)
        o = replay(t, build_cluster(paths, spec), cfg, ("ours",)).outcomes[("ours", 0)]
        assert o.state == ["finished", "finished"]
        jct[timed] = o.end - t.submit_s

    def on(rtt, ideal=600.0):  # a 2-node gang's time on a pair of that RTT (10 Gbit/s; a site each)
        return float(job_time([ideal], [0.5], [2], [rtt], [10.0], [0.0], [1.0], PERF)[0])

    # the first gang avoids a<->b either way (500 ms, or 252.5 ms averaged): 50 ms
    assert on(50.0, 100.0) + 100 < 1000
    assert jct[True][0] == pytest.approx(on(50.0, 100.0), rel=1e-6)
    assert jct[False][0] == pytest.approx(on(50.0, 100.0), rel=1e-6)
    # the second: honoured, a<->b is 5 ms now and ours takes it; averaged, it stays on a 50 ms pair
    assert jct[True][1] == pytest.approx(on(5.0), rel=1e-6)
    assert jct[False][1] == pytest.approx(on(50.0), rel=1e-6)


def test_a_gang_running_when_its_pair_degrades_slows_from_then_on(tmp_path):
    # two sites, 5 ms until second 1,000, then 200 ms: a gang placed at 0 runs its first 1,000 s fast
    p = tmp_path / "n.csv"
    p.write_text("t_s,src_site,dst_site,rtt_ms,gbps\n0,a,b,5,10\n0,b,a,5,10\n1000,a,b,200,10\n1000,b,a,200,10\n")
    spec = ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1)
    t = JobTrace("test", np.array([0.0]), np.array([3000.0]), np.array([16]), np.array([2]), ["u"], ["Pass"])
    cfg = SimConfig(cluster=spec, perf=PERF, fast_speed=1.0, data_share=0.0, **QUIET)
    o = replay(t, build_cluster(load_generic_network(p), spec), cfg, ("ours-static",)).outcomes[("ours-static", 0)]
    fast = float(job_time([1.0], [0.5], [2], [5.0], [10.0], [0.0], [1.0], PERF)[0])  # wall s per ideal s
    slow = float(job_time([1.0], [0.5], [2], [200.0], [10.0], [0.0], [1.0], PERF)[0])
    done_by_1000 = 1000.0 / fast
    assert o.end[0] == pytest.approx(1000.0 + (3000.0 - done_by_1000) * slow, rel=1e-6)


def test_the_series_steps_apply_in_time_order_and_hold():
    s = from_rows([5, 0, 5, 9], [0, 0, 1, 0], [1, 1, 0, 1], [20, 10, 21, 30], [np.nan, 4, 4, np.nan],
                  [0.05, 0, np.nan, 0])
    assert s.t_s.tolist() == [0, 5, 5, 9] and [x[0] for x in s.steps()] == [0.0, 5.0, 9.0]
    spec = ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1)
    from streams.replay.traces import SitePaths
    rtt = np.array([[0, 15.0], [15.0, 0]])
    paths = SitePaths(["a", "b"], rtt, rtt, rtt, rtt * 0, np.array([[np.nan, 4.0], [4.0, np.nan]]), s)
    truth = Truth.of(build_cluster(paths, spec))
    # at second 0: a->b is its row at 0 (10 ms, 4 Gbit/s); b->a has no row before 5: its first (21 ms)
    assert truth.site_rtt()[0, 1] == 10 and truth.site_rtt()[1, 0] == 21
    _, first, end = s.steps()[1]
    truth.step(first, end)
    assert truth.site_rtt()[0, 1] == 20 and truth.site_loss()[0, 1] == pytest.approx(0.05)
    assert truth.site_gbps()[0, 1] == pytest.approx(4 * (1 - 10 * 0.05))  # NaN bandwidth: unchanged, cut by loss


def test_loss_in_the_generic_format_must_be_a_fraction(tmp_path):
    p = tmp_path / "n.csv"
    p.write_text("t_s,src_site,dst_site,rtt_ms,loss\n0,a,b,5,1.5\n")
    with pytest.raises(TraceError, match="row 2: loss"):
        load_generic_network(p)


def series(name, rtt):
    return LabelledSeries(name, 0.0, 240.0, np.array(rtt, float), np.zeros(len(rtt), bool))


def test_real_rtt_series_drive_each_pair_as_a_ratio_to_its_median():
    base = np.array([[0, 40.0, 80.0], [40.0, 0, 20.0], [80.0, 20.0, 0]])
    # median 10: ratios 1, 1, 3 (a rise), 1 again, a failed ping, 1.04 (under the 10 % tolerance)
    s = series("x", [10, 10, 30, 10, np.nan, 10.4])
    out = rtt_dynamics(base, [s], horizon_s=5 * 240.0, seed=0)
    ab = (out.src == 0) & (out.dst == 1)
    ba = (out.src == 1) & (out.dst == 0)
    start = int(round(out.t_s[ab][0]))  # a seeded start: the pair's first step is at second 0
    assert start == 0
    np.testing.assert_allclose(out.rtt_ms[ab], out.rtt_ms[ba])  # the same both ways
    # every emitted RTT is the base (40 ms) x a ratio the series holds; outages carry the RTT, loss 1
    ratios = out.rtt_ms[ab] / 40.0
    assert set(np.round(ratios, 6)) <= {1.0, 3.0, 1.04}
    assert (out.loss[ab] == 1.0).sum() == 1 and set(out.loss[ab]) <= {0.0, 1.0}
    assert len(out.steps()) >= 3
    again = rtt_dynamics(base, [s], horizon_s=5 * 240.0, seed=0)
    np.testing.assert_array_equal(again.rtt_ms, out.rtt_ms)
    with pytest.raises(ValueError):
        rtt_dynamics(base, [], 100.0, 0)


def test_quantised_keeps_moves_past_the_tolerance_and_outage_edges():
    ratio = np.array([1.0, 1.05, 1.2, 1.25, 1.25, 1.0, 1.0])
    outage = np.array([0, 0, 0, 0, 1, 1, 0], bool)
    # 1.05 within 10 % of 1.0; 1.2 past it; 1.25 within 10 % of 1.2; the outage begins (4), ends (6:
    # 1.0 is past 10 % of 1.2 anyway)
    assert quantised(ratio, outage, 0.1).tolist() == [0, 2, 4, 6]
    assert quantised(np.array([2.0]), np.array([False]), 0.1).tolist() == [0]


def test_simulate_refuses_a_folder_without_rtt_series(tmp_path, capsys):
    from streams.cli.main import main

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n0,100,8,1,u,Pass,fine-tune\n")
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms\na,b,10\nb,a,10\n")
    argv = ["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2",
            "--seeds", "1", "--rtt-dynamics", str(tmp_path / "nowhere")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--rtt-dynamics" in err and "no *.csv" in err


def test_probes_between_sites_jitter_by_the_measured_ping_spread():
    from streams.replay.traces import SitePaths

    rtt = np.array([[0, 100.0], [100.0, 0]])
    mdev = np.array([[0, 0.5], [0.5, 0]])  # 0.5 % of the average
    paths = SitePaths(["a", "b"], rtt, rtt, rtt, mdev, np.array([[np.nan, 5.0], [5.0, np.nan]]))
    spec = ClusterSpec(sites=2, racks_per_site=2, nodes_per_rack=1)
    truth = Truth.of(build_cluster(paths, spec))
    src, dst, _, _, _ = truth.probe_paths(np.zeros((2, 2), np.int64))
    jitter = truth.probe_jitter(0.05)
    site = {n: n.split(":")[1].split(".")[0] if n.startswith("rack:") else n.split(".")[1] for n in set(src + dst)}
    for s, d, j in zip(src, dst, jitter, strict=True):
        assert j == (0.005 if site[s] != site[d] else 0.05), (s, d, j)
    # what the probes report: p95 / p50 about exp(1.645 sigma), 1.008 between sites, 1.086 inside
    from core.observe import observe

    _, _, truth_rtt, loss, _ = truth.probe_paths(np.zeros((2, 2), np.int64))
    res = observe(truth_rtt, loss, SimConfig().probes, 3, jitter)
    ratio = res["p95"] / res["p50"]
    inter = np.array([site[s] != site[d] for s, d in zip(src, dst, strict=True)])
    assert (ratio[inter] < 1.02).all() and (ratio[~inter] > 1.04).all()
    # without a measured spread, every path uses the model's
    assert Truth.of(build_cluster(SitePaths(["a", "b"], rtt, rtt, rtt, rtt * np.nan, paths.gbps), spec)) \
        .probe_jitter(0.05) is None


def test_an_in_rack_path_is_not_loaded_by_the_jobs_crossing_its_uplink():
    """Issue 52: the probes reported a path inside one rack as busy as the rack's uplink, which it never
    crosses. Two racks, two jobs crossing rack 0's uplink: rack 0 -> rack 1 is 1 - 1/3 busy, rack 0 ->
    rack 0 idle, and the store -> rack 0 path (it enters through that uplink) busy."""
    from streams.replay.traces import SitePaths

    rtt = np.array([[0, 10.0], [10.0, 0]])
    paths = SitePaths(["a", "b"], rtt, rtt, rtt, rtt * np.nan, np.array([[np.nan, 5.0], [5.0, np.nan]]))
    truth = Truth.of(build_cluster(paths, ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1)))
    uplinks = np.zeros((2, 1), np.int64)
    uplinks[0, 0] = 2
    src, dst, _, _, util = truth.probe_paths(uplinks)
    by = dict(zip(zip(src, dst, strict=True), util.tolist(), strict=True))
    r0, r1 = sorted({s for s in src if s.startswith("rack:")})
    assert by[(r0, r0)] == 0.0 and by[(r1, r1)] == 0.0
    assert by[(r0, r1)] == by[(r1, r0)] == pytest.approx(2 / 3)
    store = next(s for s, d in by if s.startswith("store.") and d == r0)
    assert by[(store, r0)] == pytest.approx(2 / 3)


def test_the_probes_measure_what_a_new_transfer_gets_on_each_path():
    """Issue 53: the throughput probes report. Two sites 5 Gbit/s apart, one rack each (1 node of
    100 Gbit/s, uplink 1 x 100 / 4 = 25 Gbit/s), two jobs crossing site a's uplink: in a rack the node
    link (100); a -> b the busier uplink shared three ways (25 / 3 = 8.3) but no more than the site
    throughput (5); b -> b's store through b's idle uplink (25); a's store -> a's rack 25 / 3."""
    from streams.replay.traces import SitePaths

    rtt = np.array([[0, 10.0], [10.0, 0]])
    paths = SitePaths(["a", "b"], rtt, rtt, rtt, rtt * np.nan, np.array([[np.nan, 5.0], [5.0, np.nan]]))
    truth = Truth.of(build_cluster(paths, ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1)))
    uplinks = np.zeros((2, 1), np.int64)
    uplinks[0, 0] = 2
    src, dst, *_ = truth.probe_paths(uplinks)
    by = dict(zip(zip(src, dst, strict=True), truth.probe_gbps(uplinks).tolist(), strict=True))
    ra, rb = "rack:a.r0", "rack:b.r0"
    assert by[(ra, ra)] == by[(rb, rb)] == 100.0
    assert by[(ra, rb)] == by[(rb, ra)] == 5.0
    assert by[("store.b", rb)] == 25.0 and by[("store.a", ra)] == pytest.approx(25 / 3)
    assert by[("store.a", rb)] == 5.0
