import numpy as np

from core.failures import node_failures, paths_lost


def test_paths_lost_counts_both_ends_and_skips_unknown():
    # paths: n0-n1 lost (0.99), n0-n2 fine, n1-store (store is not a node) lost, n2-n0 unknown loss
    nodes = np.array([[0, 1], [0, 2], [1, -1], [2, 0]])
    loss = np.array([0.99, 0.0, 1.0, np.nan])
    known, lost = paths_lost(nodes, loss, 3)
    assert known.tolist() == [2, 2, 1] and lost.tolist() == [1, 2, 0]


def test_where_a_failure_lies_worked_examples():
    # n0 silent (age 90 > 60) but its paths carry probes: compute
    # n1 reports up, in time, every path lost: network
    # n2 down and every path lost: both
    # n3 silent, no path known: unknown; n4 healthy; n5 one of two paths lost: healthy
    age = np.array([90.0, 5, 5, 90, 5, 5])
    down = np.array([False, False, True, False, False, False])
    known = np.array([3, 2, 1, 0, 2, 2])
    lost = np.array([0, 2, 1, 0, 0, 1])
    failed, cause = node_failures(age, down, 60.0, known, lost)
    assert failed.tolist() == [True, True, True, True, False, False]
    assert cause.tolist() == ["compute", "network", "both", "unknown", "", ""]


def test_empty_inputs():
    failed, cause = node_failures(np.zeros(0), np.zeros(0, bool), 60.0, np.zeros(0), np.zeros(0))
    assert failed.shape == (0,) and cause.shape == (0,)
    known, lost = paths_lost(np.zeros((0, 2), np.int64), np.zeros(0), 2)
    assert known.tolist() == [0, 0] and lost.tolist() == [0, 0]


def test_a_healthy_cluster_has_no_causes():
    """Nothing failed (the usual case at every window): every cause is "", as object strings like the
    causes of a cluster where some node failed."""
    age, down = np.array([5.0, 5.0, 59.0]), np.zeros(3, bool)
    failed, cause = node_failures(age, down, 60.0, np.array([2, 0, 3]), np.array([1, 0, 2]))
    assert failed.tolist() == [False, False, False]
    assert cause.dtype == object and cause.tolist() == ["", "", ""]
    _, other = node_failures(np.array([90.0, 5.0]), np.zeros(2, bool), 60.0, np.array([1, 1]), np.zeros(2))
    assert other.dtype == cause.dtype and other[1] == cause[0]
