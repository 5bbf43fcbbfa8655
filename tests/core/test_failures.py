import numpy as np

from core.failures import FailureRule, node_failures, path_evidence, paths_lost


def test_paths_lost_counts_both_ends_and_skips_unknown():
    # paths: n0-n1 lost (0.99), n0-n2 fine, n1-store (store is not a node) lost, n2-n0 unknown loss
    nodes = np.array([[0, 1], [0, 2], [1, -1], [2, 0]])
    loss = np.array([0.99, 0.0, 1.0, np.nan])
    known, lost, observers = paths_lost(nodes, loss, 3)
    assert known.tolist() == [2, 2, 1] and lost.tolist() == [1, 2, 0]
    # n0-n1 probed by n0: n0 and n1 each seen lost by n0; n1-store probed by n1: n1 by itself too
    assert observers.tolist() == [1, 2, 0]


def test_where_a_failure_lies_worked_examples():
    # n0 silent (age 90 > 60) but its paths carry probes: compute
    # n1 reports up, in time, every path lost: network
    # n2 down and every path lost: both
    # n3 silent, no path known: unknown; n4 healthy; n5 one of two paths lost: healthy
    age = np.array([90.0, 5, 5, 90, 5, 5])
    down = np.array([False, False, True, False, False, False])
    known = np.array([3, 2, 1, 0, 2, 2])
    lost = np.array([0, 2, 1, 0, 0, 1])
    failed, cause, withheld = node_failures(age, down, 60.0, known, lost, rule=FailureRule(max_network_fraction=1.0))
    assert failed.tolist() == [True, True, True, True, False, False] and not withheld.any()
    assert cause.tolist() == ["compute", "network", "both", "unknown", "", ""]


def test_empty_inputs():
    failed, cause, withheld = node_failures(np.zeros(0), np.zeros(0, bool), 60.0, np.zeros(0), np.zeros(0))
    assert failed.shape == (0,) and cause.shape == (0,) and withheld.shape == (0,)
    known, lost, observers = paths_lost(np.zeros((0, 2), np.int64), np.zeros(0), 2)
    assert known.tolist() == [0, 0] and lost.tolist() == [0, 0] and observers.tolist() == [0, 0]


def test_a_healthy_cluster_has_no_causes():
    """Nothing failed (the usual case at every window): every cause is "", as object strings like the
    causes of a cluster where some node failed."""
    age, down = np.array([5.0, 5.0, 59.0]), np.zeros(3, bool)
    failed, cause, _ = node_failures(age, down, 60.0, np.array([2, 0, 3]), np.array([1, 0, 2]))
    assert failed.tolist() == [False, False, False]
    assert cause.dtype == object and cause.tolist() == ["", "", ""]
    _, other, _ = node_failures(np.array([90.0, 5.0]), np.zeros(2, bool), 60.0, np.array([1, 1]), np.zeros(2))
    assert other.dtype == cause.dtype and other[1] == cause[0]


def test_a_path_is_evidence_only_with_enough_probes_an_answering_peer_and_past_the_grace():
    rule = FailureRule(min_probes=3, grace_s=30.0)
    count = np.array([1, 3, 10, 10, np.nan, 10])
    answered = np.array([True, True, False, True, True, True])
    first_age = np.array([100.0, 30.0, 100.0, 29.9, 100.0, np.nan])
    # one probe; enough and just at the grace; a peer that never answered; too young; no probes; no first window
    assert path_evidence(count, answered, first_age, rule).tolist() == [False, True, False, False, False, False]


def test_a_network_failure_needs_two_observers_and_a_node_past_its_grace():
    # n0: every path lost but seen by itself alone; n1: seen by two; n2: by two, joined 10 s ago
    age, down = np.full(5, 5.0), np.zeros(5, bool)
    known, lost = np.array([2, 2, 2, 3, 3]), np.array([2, 2, 2, 0, 0])
    observers = np.array([1, 2, 2, 0, 0])
    joined = np.array([600.0, 600.0, 10.0, 600.0, 600.0])
    failed, cause, withheld = node_failures(age, down, 60.0, known, lost, observers, joined, FailureRule())
    assert failed.tolist() == [False, True, False, False, False]
    assert cause.tolist() == ["", "network", "", "", ""] and not withheld.any()


def test_too_many_network_failures_at_once_are_withheld_not_declared():
    # four nodes, three of them lose every path seen by two observers: 3 > 0.5 x 4 -> none declared,
    # all three withheld; n3 is silent as well: its own reports stopped, it fails (compute) regardless
    age = np.array([5.0, 5.0, 5.0, 90.0])
    down = np.zeros(4, bool)
    known, lost, observers = np.full(4, 3), np.array([3, 3, 3, 0]), np.full(4, 2)
    failed, cause, withheld = node_failures(age, down, 60.0, known, lost, observers, np.full(4, 600.0))
    assert failed.tolist() == [False, False, False, True] and cause.tolist() == ["", "", "", "compute"]
    assert withheld.tolist() == [True, True, True, False]
    # two of four is within the cap (2 <= 0.5 x 4): declared
    failed, cause, withheld = node_failures(age[:4], down, 60.0, known, np.array([3, 3, 0, 0]), observers,
                                            np.full(4, 600.0))
    assert failed.tolist() == [True, True, False, True] and not withheld.any()
    assert cause.tolist() == ["network", "network", "", "compute"]


def test_a_dark_path_is_one_between_two_fine_nodes_that_still_reach_others():
    from core.failures import dark_paths

    # both directions of each pair probed by its source: n0-n1 lost both ways (dark), n0-n2 fine, n1-n2
    # lost one way only (one prober alone), every path of n3 lost (its failure, or its prober's, not its
    # paths'), n1-store (not a node) lost
    nodes = np.array([[0, 1], [1, 0], [0, 2], [2, 0], [1, 2], [2, 1], [2, 3], [3, 2], [3, 0], [0, 3],
                      [1, 3], [3, 1], [1, -1]])
    loss = np.array([1.0, 0.97, 0, 0, 1.0, 0, 0.96, 0.99, 1.0, 1.0, 1.0, 1.0, 1.0])
    known, lost, _ = paths_lost(nodes, loss, 4)
    assert (known - lost).tolist() == [2, 1, 3, 0]
    down = np.zeros(4, bool)
    dark = dark_paths(nodes, loss, down, known, lost)
    assert np.flatnonzero(dark).tolist() == [0, 1]
    # one direction unknown: the known one decides, but one prober alone is not enough ...
    one_way = np.where(np.arange(13) == 1, np.nan, loss)
    assert not dark_paths(nodes, one_way, down, known, lost)[0]
    assert dark_paths(nodes, one_way, down, known, lost, min_observers=1)[0]  # ... unless one is asked for
    # an end down: not the path's outage; a loss below 0.95 or not evidence: not dark
    assert not dark_paths(nodes, loss, np.array([False, True, False, False]), known, lost).any()
    assert not dark_paths(nodes, np.where(loss > 0.5, 0.9, 0.0), down, known, lost).any()
    assert not dark_paths(nodes, loss, down, known, lost, evidence=np.zeros(13, bool)).any()
    # NaN loss, empty input
    assert not dark_paths(nodes, np.full(13, np.nan), down, known, lost).any()
    assert dark_paths(np.zeros((0, 2), np.int64), np.zeros(0), down, known, lost).shape == (0,)
