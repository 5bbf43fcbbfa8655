"""Issue 53's E5: the network over time where placements use it — each rack's uplink driven by a real
labelled RTT series, and the jobs a labelled change point reaches while they run flagged (``Outcome.hit``) and
reported apart (stats' ``changed`` / ``steady``)."""

import dataclasses

import numpy as np
import pytest

from core.jobperf import PerfModel
from streams.analytics.rtt_series import LabelledSeries
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.dynamics import uplink_dynamics
from streams.replay.results import replay
from streams.replay.stats import compare, exposure_mask
from streams.replay.traces import JobTrace, load_generic_network
from streams.replay.world import SimConfig, Truth

QUIET = dict(reroutes_per_day=0.0, bursts_per_day=0.0, failures_per_node_day=0.0)
PERF = PerfModel(comm_share_low=0.5, comm_share_high=0.5)


def labelled(rtt, change_at):
    change = np.zeros(len(rtt), bool)
    change[list(change_at)] = True
    return LabelledSeries("x", 0.0, 240.0, np.array(rtt, float), change)


# median 10 ms; a labelled change at 3 to 30 ms (a 3x rise), one at 6 back down
SERIES = labelled([10, 10, 10, 30, 30, 30, 10, 10], [3, 6])


def test_each_rack_uplink_follows_its_series_as_a_ratio_and_marks_the_labelled_changes():
    out = uplink_dynamics(4, [SERIES], horizon_s=7 * 240.0, seed=0)  # 8 steps: the series once round
    assert sorted(set(out.rack.tolist())) == [0, 1, 2, 3]
    assert set(np.round(out.ratio, 6)) == {1.0, 3.0}
    for g in range(4):
        mine = out.rack == g
        # two changes a rack: at one the ratio goes to 3, at the other back to 1
        assert sorted(out.ratio[mine][out.change[mine]].tolist()) == [1.0, 3.0]
    assert np.all(np.diff(out.t_s) >= 0)
    again = uplink_dynamics(4, [SERIES], horizon_s=7 * 240.0, seed=0)
    np.testing.assert_array_equal(again.t_s, out.t_s)
    with pytest.raises(ValueError):
        uplink_dynamics(4, [], 100.0, 0)


def one_site(tmp_path):
    """One site, two racks of one node: a 2-node gang crosses both uplinks."""
    p = tmp_path / "n.csv"
    p.write_text("src_site,dst_site,rtt_ms,gbps\na,a,0,100\n")
    spec = ClusterSpec(sites=1, racks_per_site=2, nodes_per_rack=1, oversubscription=8.0)
    return build_cluster(load_generic_network(p), spec), spec


def test_a_gang_across_uplinks_a_rise_reaches_is_flagged_and_slows(tmp_path):
    cluster, spec = one_site(tmp_path)
    # a long gang across both racks (4 cards a node), and a one-node job beside it (it crosses no uplink:
    # never flagged, never slowed)
    t = JobTrace("t", np.array([0.0, 0.0]), np.array([6 * 3600.0, 6 * 3600.0]), np.array([8, 4]), np.array([2, 1]),
                 ["u0", "u1"], ["Pass"] * 2)
    runs = {}
    for up in (False, True):
        cfg = SimConfig(cluster=spec, perf=PERF, fast_speed=1.0, data_share=0.0, epoch_s=240.0, uplink_dynamics=up,
                        **QUIET)
        o = replay(t, cluster, cfg, ("ours-static",), rtt_series=[SERIES]).outcomes[("ours-static", 0)]
        assert o.state == ["finished", "finished"]
        runs[up] = o
    # without uplinks driven nothing in-site changes: no flag; with them the changes (within 8 steps,
    # then every 32 min as the series wraps) reach the gang, which runs at the slow uplink's pace meanwhile
    assert runs[False].hit.tolist() == [False, False]
    assert runs[True].hit.tolist() == [True, False]
    assert runs[True].end[0] > runs[False].end[0] and runs[True].end[1] == runs[False].end[1]



def test_the_truth_and_its_probes_see_the_uplink_in_force(tmp_path):
    cluster, spec = one_site(tmp_path)
    # median 20: ratios 1.5 and 0.5 — below 1 counts as 1 (the uplink's nominal figures are its best)
    up = uplink_dynamics(2, [labelled([30, 10], [])], horizon_s=4 * 240.0, seed=0)
    assert set(up.ratio.tolist()) == {1.0, 1.5}
    truth = Truth.of(dataclasses.replace(cluster, uplinks=up))
    first = up.ratio[up.t_s == 0]  # in force at the start: each rack's first step
    np.testing.assert_allclose(truth.uplink_ratio.ravel(), first)
    src, dst, rtt, _, _ = truth.probe_paths(np.zeros((1, 2)))
    gbps = truth.probe_gbps(np.zeros((1, 2)))
    across = [i for i, (a, b) in enumerate(zip(src, dst, strict=True)) if a.startswith("rack:") and a != b]
    q = truth.uplink_ratio.ravel().max()
    # rack to rack: 0.2 ms x the larger ratio; the new transfer's share: 12.5 Gbit/s (1 x 100 / 8) / that ratio
    assert rtt[across] == pytest.approx(0.2 * q) and gbps[across] == pytest.approx(12.5 / q)
    truth.step_uplinks(0, len(up))  # every row, the last of each rack's last: 1.5 or 1 as the start fell
    assert set(truth.uplink_ratio.ravel().tolist()) <= {1.0, 1.5}


def test_changed_and_steady_pair_the_jobs_either_policy_saw_a_change_on():
    class Out:  # an outcome's fields stats reads
        def __init__(self, end, hit):
            self.end, self.start, self.hit = np.array(end, float), np.zeros(len(end)), np.array(hit, bool)

    a, b = Out([10, 20, 30, 40], [1, 0, 0, 0]), Out([12, 20, 33, 40], [0, 1, 0, 0])
    assert exposure_mask("changed", a, b).tolist() == [True, True, False, False]
    assert exposure_mask("steady", a, b).tolist() == [False, False, True, True]
    assert exposure_mask("gang", a, b) is True

    class Jobs:
        def __init__(self):
            self.nodes, self.home = np.array([2, 2, 2, 2]), np.full(4, -1)
            self.submit, self.completed = np.zeros(4), np.ones(4, bool)

        def __len__(self):
            return 4

    class Run:
        seeds, jobs, outcomes = (0,), {0: Jobs()}, {("ours", 0): a, ("topology", 0): b}

    # changed: jobs 0 and 1, means 15 vs 16 -> -6.25 %; steady: jobs 2 and 3, 35 vs 36.5
    assert compare(Run, "ours", "topology", "changed", "jct")["change"] == pytest.approx(15 / 16 - 1)
    assert compare(Run, "ours", "topology", "steady", "jct")["change"] == pytest.approx(35 / 36.5 - 1)
