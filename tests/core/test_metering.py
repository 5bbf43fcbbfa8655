import numpy as np
import pytest

from core.metering import (
    DEFAULT_METERING,
    NodeMetrics,
    compute_capability,
    compute_scores,
    dimensions,
    normalise_in_class,
)

NAN = np.nan


def nodes(**over):
    n = 4
    base = dict(
        node_class=np.array([0, 0, 0, 1]),
        cards=np.array([8, 8, 4, 0]),
        # per card: fp32, fp16, int8; node 0's vendor states sparse fp16 (factor 0.5)
        peak=np.array([[60, 1000, 2000], [19.5, 312, 624], [19.5, 312, 624], [2, 0, 0]], dtype=float),
        peak_factor=np.array([[1, 0.5, 0.5], [1, 1, 1], [1, 1, 1], [1, 1, 1]], dtype=float),
        bench_value=np.array([NAN, 3000.0, 9999.0, NAN]),
        bench_work=np.array([NAN, 0.5e12, 0.5e12, NAN]),
        bench_age_s=np.array([NAN, 3600.0, 30 * 86400.0, NAN]),
        mem_gb=np.array([80, 40, 80, 0], dtype=float),
        mem_bw_gbs=np.array([3350, 1555, 2039, 0], dtype=float),
        host_mem_bw_gbs=np.array([400, 200, 200, 100], dtype=float),
        intra_bw_gbps=np.array([7200, 4800, 4800, 0], dtype=float),
        intra_bw_measured_gbps=np.array([NAN, 4000, NAN, NAN]),
        inter_bw_gbps=np.array([400, 200, 200, 25], dtype=float),
        inter_bw_measured_gbps=np.array([NAN, NAN, NAN, NAN]),
        availability=np.array([1.0, 0.99, 1.0, 1.0]),
        idle_rate=np.array([0.5, 0.2, 1.0, 0.0]),
        queue_delay_s=np.array([0.0, 60.0, 600.0, 0.0]),
    )
    base.update(over)
    assert all(len(v) == n for v in base.values())
    return NodeMetrics(**base)


def test_capability_prefers_a_fresh_benchmark_and_converts_peaks():
    cap = compute_capability(nodes(), precision=1)  # fp16
    # node 0: no benchmark -> 8 cards x 1000 x 0.5 (sparse -> dense) x 0.4 efficiency = 1600
    # node 1: fresh benchmark -> 3000 samples/s x 0.5 TFLOP/sample = 1500
    # node 2: benchmark 30 days old (limit 7) -> 4 x 312 x 1 x 0.4 = 499.2
    # node 3: no cards -> 0
    assert cap.tolist() == pytest.approx([1600.0, 1500.0, 499.2, 0.0])


def test_normalise_in_class_table():
    # like kube-scheduler's DefaultNormalizeScore table: {1,2,3,4} -> {25,50,75,100}
    v = normalise_in_class(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(4, dtype=int))
    assert v.tolist() == [25.0, 50.0, 75.0, 100.0]
    two = normalise_in_class(np.array([5.0, 10.0, 0.0, 0.0]), np.array([0, 0, 1, 1]))
    assert two.tolist() == [50.0, 100.0, 0.0, 0.0]  # a class whose best is 0 scores 0
    assert normalise_in_class(np.array([]), np.array([], dtype=int)).size == 0


def test_dimension_worked_example():
    d = dimensions(nodes(), "training")
    compute, storage, interconnect, quality = d.T
    assert compute[:3].tolist() == pytest.approx([100.0, 93.75, 31.2])
    # storage node 0: capacity 640 GB (best), bandwidth 26800 (best), host 400 (best) -> 100
    # node 1: 320/640=50, 12440/26800=46.418, 200/400=50 -> 0.5*50 + 0.3*46.418 + 0.2*50 = 48.925
    assert storage[:2].tolist() == pytest.approx([100.0, 48.925], abs=1e-3)
    # interconnect node 1: intra measured 4000 vs node 0's 7200*0.8=5760 -> 69.444;
    # inter 200*0.8=160 vs 320 -> 50; mean 59.722
    assert interconnect[1] == pytest.approx(59.722, abs=1e-3)
    # quality node 1: 100*(0.5*0.99 + 0.3*0.2 + 0.2*(1 - 60/600)) = 49.5 + 6 + 18 = 73.5
    # node 2: queue at the bad limit: 100*(0.5 + 0.3 + 0) = 80
    assert quality[:3].tolist() == pytest.approx([85.0, 73.5, 80.0])
    # cpu class of one node: its own best
    assert compute[3] == 0.0 and storage[3] == pytest.approx(20.0) and interconnect[3] == pytest.approx(50.0)


def test_best_node_of_each_class_scores_100_and_task_kinds_differ():
    s_train = compute_scores(nodes(), "training")
    s_inf = compute_scores(nodes(), "inference")
    assert s_train.max() == pytest.approx(100.0) and s_train[np.argmax(s_train)] == pytest.approx(100.0)
    assert s_train[3] == pytest.approx(100.0)  # alone in its class
    assert all(0 <= x <= 100 for x in np.r_[s_train, s_inf])
    # node 2 (lots of idle memory, slow stale compute) gains on inference relative to training
    assert s_inf[2] / s_inf[0] > s_train[2] / s_train[0]


def test_unknown_task_kind_is_rejected():
    with pytest.raises(KeyError, match="unknown task kind 'gaming'"):
        DEFAULT_METERING.weights("gaming")


def two_classes():
    """An H100-like and an L40S-like node, alone in their classes, alike but for fp16: 1000 vs 400 per card."""
    one = dict(cards=np.array([8, 8]), peak_factor=np.ones((2, 3)), bench_value=np.full(2, NAN),
               bench_work=np.full(2, NAN), bench_age_s=np.full(2, NAN), mem_gb=np.full(2, 48.0),
               mem_bw_gbs=np.full(2, 900.0), host_mem_bw_gbs=np.full(2, 200.0), intra_bw_gbps=np.full(2, 600.0),
               intra_bw_measured_gbps=np.full(2, NAN), inter_bw_gbps=np.full(2, 200.0),
               inter_bw_measured_gbps=np.full(2, NAN), availability=np.ones(2), idle_rate=np.ones(2),
               queue_delay_s=np.zeros(2))
    return NodeMetrics(node_class=np.array([0, 1]), peak=np.array([[60, 1000, 2000], [90, 400, 800]], float), **one)


def test_standard_units_across_classes_with_the_cluster_scope():
    """Issue 18: converting to standard units is undone by normalising within each class. In its class
    each node is the best (100, 100); across the cluster the L40S-like node has 40 % of the compute
    and all else alike: training weighs compute 0.5, so 0.5 x 40 + 0.5 x 100 = 70."""
    m = two_classes()
    assert compute_scores(m, "training").tolist() == [100.0, 100.0]
    assert dimensions(m, "training", scope="cluster")[:, 0].tolist() == pytest.approx([100.0, 40.0])
    assert compute_scores(m, "training", scope="cluster").tolist() == pytest.approx([100.0, 70.0])
    # inference weighs compute 0.3 at int8 (2000 vs 800): 0.3 x 40 + 0.7 x 100 = 82
    assert compute_scores(m, "inference", scope="cluster").tolist() == pytest.approx([100.0, 82.0])


def test_economy_keeps_high_end_cards_for_work_that_needs_them():
    """Issue 18: fine-tuning and preprocessing need little accelerator and waste high-end cards. The
    two-class pair: training capability 8 x 1000 x 0.4 = 3200 and 8 x 400 x 0.4 = 1280 (fp16); the
    weaker card keeps its in-class score (100), the stronger 1280 / 3200 = 40 % of its own (40)."""
    from core.metering import economy_scores

    m = two_classes()
    assert compute_capability(m, 1).tolist() == pytest.approx([3200.0, 1280.0])
    assert economy_scores(m, "training").tolist() == pytest.approx([40.0, 100.0])
    # among alike cards the usual score decides: node 1 of nodes() (fresh benchmark 1500 vs 1600) is
    # weaker than node 0 by 1500/1600, so it keeps its score x 1 and node 0 x 1500/1600 (node 2: 499.2
    # is the weakest of all, node 3 has no cards and wastes none)
    base = compute_scores(nodes(), "training")
    cap = compute_capability(nodes(), 1)
    assert economy_scores(nodes(), "training").tolist() == pytest.approx(
        [base[0] * 499.2 / cap[0], base[1] * 499.2 / cap[1], base[2], base[3]])
