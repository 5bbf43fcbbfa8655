"""Reservations and backfill (core/reservation.py), with the numbers worked out."""

import numpy as np

from core.reservation import blocks, node_free_times, reserve

NOW = 1000.0


def test_free_times_from_expected_ends():
    # 8-card nodes, cards only: n0 has 2 free and a 6-card task ending at +100; n1 is full of a 6-card
    # task ending at +300 and a 2-card one ending at +50; n2 of one 8-card task ending at +200; n3 is free
    usable = np.array([[2.0], [0.0], [0.0], [8.0]])
    rel_node, rel_at = np.array([0, 1, 1, 2]), np.array([NOW + 100, NOW + 300, NOW + 50, NOW + 200])
    rel = np.array([[6.0], [6.0], [2.0], [8.0]])
    feasible = np.array([True, True, True, True])
    # 8 cards: n0 at +100 (2 + 6); n1 at +300 (2 at +50, + 6 at +300); n2 at +200; n3 now
    got = node_free_times([8.0], usable, feasible, rel_node, rel_at, rel, NOW)
    np.testing.assert_array_equal(got, [NOW + 100, NOW + 300, NOW + 200, NOW])
    # 2 cards: n1 already at +50, n0 now
    np.testing.assert_array_equal(node_free_times([2.0], usable, feasible, rel_node, rel_at, rel, NOW),
                                  [NOW, NOW + 50, NOW + 200, NOW])
    # a node the task cannot run on never frees for it; a need no node can meet neither
    assert node_free_times([8.0], usable, ~feasible, rel_node, rel_at, rel, NOW).tolist() == [np.inf] * 4
    assert np.isinf(node_free_times([9.0], usable, feasible, rel_node, rel_at, rel, NOW)).all()
    # an overdue task is expected to end now, not in the past
    assert node_free_times([8.0], usable, feasible, rel_node, np.full(4, NOW - 50), rel, NOW)[0] == NOW


def test_reserve_takes_the_nodes_that_free_first():
    free_at = np.array([NOW + 100, NOW + 300, NOW + 200, np.inf])
    assert reserve(free_at, 1) == (NOW + 100, [0])
    assert reserve(free_at, 2) == (NOW + 200, [0, 2])  # a gang starts when its last node frees
    assert reserve(free_at, 4) is None
    assert reserve(np.array([NOW, NOW]), 1) == (NOW, [0])  # ties: the lower index


def test_backfill_only_where_it_cannot_delay_the_reservation():
    reserved = np.array([True, False, True])
    # the reservation starts at +100: a 50 s task may use every node, a 500 s one not the reserved
    assert not blocks(reserved, NOW + 100, NOW, 50.0).any()
    assert blocks(reserved, NOW + 100, NOW, 500.0).tolist() == [True, False, True]
    assert blocks(reserved, NOW + 100, NOW, 100.0).tolist() == [False, False, False]  # ends as it starts


def test_nothing_running_nothing_frees():
    free = node_free_times([4.0, 10.0], np.array([[2.0, 80.0], [8.0, 80.0]]), np.ones(2, bool),
                           np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 2)), NOW)
    assert free.tolist() == [np.inf, NOW]
    assert node_free_times([1.0], np.zeros((0, 1)), np.zeros(0, bool), [], [], np.zeros((0, 1)), NOW).size == 0


def loop_free_times(need, usable, feasible, release_node, release_at, release, now):
    """The plain loop node_free_times compiled: the reference it must equal."""
    need, usable = np.asarray(need, float), np.asarray(usable, float)
    out = np.where(np.all(usable >= need, axis=1), now, np.inf)
    release_at = np.maximum(release_at, now)
    room = usable.copy()
    for m in sorted(range(len(release_node)), key=lambda m: (release_node[m], release_at[m], m)):
        k = release_node[m]
        if np.isfinite(out[k]):
            continue
        room[k] += release[m]
        if np.all(room[k] >= need):
            out[k] = release_at[m]
    return np.where(feasible, out, np.inf)


def test_node_free_times_equals_the_plain_loop_on_random_books():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(0, 12))
        m = int(rng.integers(0, 30)) if n else 0
        usable = np.c_[rng.integers(0, 9, n), rng.choice([0.0, 40.0, 80.0], n)].astype(float)
        need = np.array([float(rng.integers(1, 9)), 40.0])
        feasible = rng.random(n) < 0.8
        rel_node = rng.integers(0, max(n, 1), m)
        rel_at = np.round(rng.uniform(NOW - 100, NOW + 1000, m), 0)  # ties in time, some already overdue
        rel = np.c_[rng.integers(1, 5, m), rng.choice([0.0, 40.0], m)].astype(float)
        want = loop_free_times(need, usable, feasible, rel_node, rel_at, rel, NOW)
        np.testing.assert_array_equal(node_free_times(need, usable, feasible, rel_node, rel_at, rel, NOW), want)
