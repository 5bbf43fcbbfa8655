"""A workload's card speeds learned from its runners' rates (streams/worker/scheduling/speeds.py): a
task naming a workload that ran slower on the newer card is placed on the older one; other workloads
keep the metering's speeds; moves and the run-time history read the same speeds."""

import math

import numpy as np
import pytest

from schemas.sched import Task
from streams.worker.scheduling import speeds as speeds_module
from streams.worker.scheduling.speeds import KEEP, Speeds
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def task(tid, workload="ncf", **kw):
    return Task(id=tid, type="fine-tune", resources={"cards": 8}, submitted_at=NOW, expected_duration_s=3600.0,
                workload=workload, **kw)


def scheduler():
    s = make_scheduler([gpu_node("h", NOW, fp16=1500.0, accel_model="H100"),
                        gpu_node("a", NOW, fp16=1000.0, accel_model="A100")], {})
    s.node_timeout_s, s.freshness = math.inf, None
    return s


def test_a_workload_slower_on_the_newer_card_goes_to_the_older_one_once_both_are_measured():
    s = scheduler()
    assert s.decide(task("t1"), NOW).nodes == ["h"]  # nothing measured: the metering's 1.5x card
    assert s.decide(task("t2"), NOW).nodes == ["a"]
    assert s.finished("t1", NOW + 100, throughput=23.3)  # steps/s on the H100
    nodes = s.nodes(NOW + 100)
    np.testing.assert_array_equal(s.speeds.of("ncf", nodes), nodes.speeds())  # one model measured: metered
    s.decide(task("t3"), NOW + 100)  # the H100 is free again: it still looks 1.5x
    assert s.running["t3"].nodes == ["h"]
    s.finished("t2", NOW + 200, throughput=48.9)  # the A100: 48.9 steps/s, twice the H100's
    nodes = s.nodes(NOW + 200)
    got = dict(zip(nodes.ids, s.speeds.of("ncf", nodes).tolist(), strict=True))
    assert got == pytest.approx({"a": 1.0, "h": 23.3 / 48.9})
    s.finished("t3", NOW + 300, throughput=23.0)
    assert s.decide(task("t4"), NOW + 300).nodes == ["a"]  # 1.0 against 0.48: the older card
    assert s.decide(task("t5", workload="resnet"), NOW + 300).nodes == ["h"]  # not measured: metered 1.5x
    assert s.decide(task("t6", workload=None), NOW + 300).nodes == []  # both taken: it waits


def test_only_rates_of_one_known_card_model_are_kept_and_the_median_of_the_last_ones_is_read():
    sp = Speeds()
    assert not sp.measured("ncf", ["H100", "A100"], 10.0)  # mixed members: their pace is the slowest's
    assert not sp.measured("ncf", ["", ""], 10.0) and not sp.measured(None, ["A100"], 10.0)
    assert not sp.measured("ncf", ["A100"], None) and not sp.measured("ncf", ["A100"], 0.0)
    assert not sp.measured("ncf", ["A100"], float("nan")) and sp.version == 0
    for r in [100.0, 40.0, 50.0, 60.0, 1.0, 55.0]:  # the first of KEEP + 1 is gone; the median of the rest
        assert sp.measured("ncf", ["A100", "A100"], r)
    assert len(sp.rates["ncf"]["A100"]) == KEEP and float(np.median(sp.rates["ncf"]["A100"])) == 50.0


def test_a_rate_of_one_workload_leaves_the_others_speeds_as_they_were_computed():
    """The memo is per workload: with 10,000 workloads remembered, one finish does not make every one
    of them computed again; a rate of the workload itself does."""
    s = scheduler()
    nodes = s.nodes(NOW)
    sp = s.speeds
    for w in ("ncf", "resnet"):
        sp.measured(w, ["H100"], 20.0), sp.measured(w, ["A100"], 40.0)
    ncf, resnet = sp.of("ncf", nodes), sp.of("resnet", nodes)
    assert sp.of("ncf", nodes) is ncf  # read again: the same array
    sp.measured("resnet", ["H100"], 80.0)  # resnet's H100 median is now 50: resnet's speeds change
    assert sp.of("ncf", nodes) is ncf
    again = sp.of("resnet", nodes)
    assert again is not resnet and dict(zip(nodes.ids, again.tolist(), strict=True)) == \
        pytest.approx({"a": 1.0, "h": 50.0 / 40.0})


def test_the_least_recently_measured_workload_is_forgotten_beyond_the_bound(monkeypatch):
    monkeypatch.setattr(speeds_module, "WORKLOADS", 2)
    sp = Speeds()
    for w in ("w1", "w2", "w1", "w3"):  # w1 measured again after w2: w2 is the least recent
        sp.measured(w, ["A100"], 1.0)
    assert list(sp.rates) == ["w1", "w3"] and list(sp.rates["w1"]["A100"]) == [1.0, 1.0]


def test_the_run_time_history_counts_a_run_at_its_workloads_speed():
    s = scheduler()
    s.decide(task("t1", submitted_by="u"), NOW)  # on h
    s.decide(task("t2", submitted_by="u"), NOW)  # on a
    s.finished("t2", NOW + 1800, throughput=48.9)  # 1,800 s x 1.0 of 3,600: 1/2
    s.finished("t1", NOW + 1800, throughput=23.3)  # 1,800 s at h's learned 0.4765, not the metered 1.5
    np.testing.assert_allclose(list(s.durations.ratios["u"]), [0.5, 1800 * 23.3 / 48.9 / 3600])


def test_the_topology_baseline_costs_with_the_metering():
    from streams.replay.baselines import TopologyScheduler

    s = scheduler()
    assert TopologyScheduler(s.net, s.inv).speeds is None and s.speeds is not None
