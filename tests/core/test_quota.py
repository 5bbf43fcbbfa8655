"""Quotas, borrowing, dominant-resource fairness and victim choice (core/quota.py), with worked numbers."""

import numpy as np

from core.quota import (
    ANY,
    borrowed,
    choose_victims,
    dominant_shares,
    eligible_victims,
    queue_order,
    response_ratio,
    starving_tasks,
    usage,
    within_guarantee,
    within_maximum,
)

INF = np.inf
# two teams, classes (A100, H100) and any: research is guaranteed 8 A100, at most 16 of any class;
# prod is guaranteed 8 H100 and 4 A100, at most 12 in all
GUARANTEED = np.array([[8, 0, 8], [4, 8, 12]], float)
MAXIMUM = np.array([[16, 16, 16], [12, 12, 12]], float)


def test_usage_per_class_and_in_all():
    u = usage([0, 0, 1, -1], [0, 1, 1, 0], [4, 2, 8, 100], 2, 2)
    assert u.tolist() == [[4, 2, 6], [0, 8, 8]]  # the task of no team is counted nowhere


def test_borrowed_tasks_are_those_placed_after_the_guarantee_was_full():
    # research places 4, 4, 4 A100 cards at t = 1, 2, 3: 8 within its guarantee, the third borrows;
    # its H100 card at t = 4 borrows too (no H100 guarantee)
    team, cls, cards, at = [0, 0, 0, 0, 1], [0, 0, 0, 1, 1], [4, 4, 4, 1, 8], [1, 2, 3, 4, 5]
    assert borrowed(team, cls, cards, at, GUARANTEED).tolist() == [False, False, True, True, False]
    # placement order decides, not the order of the arrays
    assert borrowed(team[::-1], cls[::-1], cards[::-1], at[::-1], GUARANTEED).tolist() == [False, True, True, False, False]
    # a task straddling the guarantee (6 + 4 > 8) borrows
    assert borrowed([0, 0], [0, 0], [6, 4], [1, 2], GUARANTEED).tolist() == [False, True]


def test_maximum_of_the_class_and_of_all_classes():
    u = usage([1, 1], [0, 1], [4, 6], 2, 2)  # prod holds 4 A100 + 6 H100 = 10 of its 12
    node_cls = np.array([0, 1, 0])
    assert within_maximum(1, 2, node_cls, u, MAXIMUM).tolist() == [True, True, True]
    assert within_maximum(1, 3, node_cls, u, MAXIMUM).tolist() == [False, False, False]  # 13 > 12 in all
    assert within_maximum(0, 16, node_cls, u, MAXIMUM).tolist() == [True, True, True]
    assert within_maximum(0, 17, node_cls, u, MAXIMUM).tolist() == [False, False, False]
    assert within_maximum(-1, 1000, node_cls, u, MAXIMUM).all()  # no quota team: no maximum
    assert within_guarantee(1, 2, 1, u, GUARANTEED) and not within_guarantee(1, 3, 1, u, GUARANTEED)
    assert not within_guarantee(0, 1, 1, u, GUARANTEED)  # research has no H100 guarantee


def test_dominant_share_worked_example():
    # 16 A100 and 8 H100: research holds 8 A100 (0.5) and 2 H100 (0.25) -> 0.5; prod 2 A100 and
    # 6 H100 -> max(0.125, 0.75) = 0.75; a class without cards counts for nothing
    u = usage([0, 0, 1, 1], [0, 1, 0, 1], [8, 2, 2, 6], 2, 3)
    np.testing.assert_allclose(dominant_shares(u, [16, 8, 0]), [0.5, 0.75])


def test_queue_order_priority_then_share_then_wait():
    priority = np.array([50, 50, 90, 50, 50])
    share = np.array([0.7, 0.1, 0.9, 0.1, 0.4])
    waited = np.array([100, 10, 5, 50, 2000])
    # task 4 starves (waited 2000 >= 1000); then 2 (priority 90); then the smaller shares: 3 (waited
    # longer) before 1, then 0 (share 0.7)
    assert queue_order(priority, share, waited, 1000).tolist() == [4, 2, 3, 1, 0]


def test_response_ratio_worked_examples():
    np.testing.assert_allclose(response_ratio([1000, 40_000, 0, 5], [100, 36_000, 50, 0]),
                               [11.0, 76_000 / 36_000, 1.0, 6.0])  # a run under 1 s counts as 1 s


def test_queue_order_by_response_ratio_against_first_come():
    """Three tasks: short (100 s run, waited 1,000 s: ratio 11), long (36,000 s, waited 40,000 s: 2.11),
    mid (3,600 s, waited 3,000 s: 1.83, priority 90); the longest wait is 600 s."""
    priority = np.array([50, 50, 90])
    waited = np.array([1000.0, 40_000.0, 3000.0])
    run = np.array([100.0, 36_000.0, 3600.0])
    # first come: all three waited past 600 s, so all starve: longest wait first, priority aside
    assert queue_order(priority, np.zeros(3), waited, 600).tolist() == [1, 2, 0]
    # by ratio: short and long waited as long as they run (they starve), mid not: its priority
    # counts only after them; among the starving the higher ratio first
    assert starving_tasks(waited, 600, run).tolist() == [True, True, False]
    assert queue_order(priority, np.zeros(3), waited, 600, run).tolist() == [0, 1, 2]
    # none starving (a longer longest wait): priority first, then the ratio
    assert queue_order(priority, np.zeros(3), waited, 50_000, run).tolist() == [2, 0, 1]


def test_who_may_be_preempted():
    same_team = np.array([True, False, False, True, False])
    vprio = np.array([50, 50, 50, 90, 95])
    vborrowed = np.array([False, False, True, False, True])
    # an urgent task (90) of a team within its guarantee: its own team's lower-priority work, any
    # borrowed work; never another team's in-quota work, nor its own team's equal priority
    got = eligible_victims(90, True, same_team, vprio, vborrowed, quotas=True)
    assert got.tolist() == [True, False, True, False, True]
    # a task of priority 50 past its guarantee reclaims nothing and takes nothing of equal priority
    assert not eligible_victims(50, False, same_team, vprio, vborrowed, quotas=True).any()
    # without quotas, priority alone decides
    assert eligible_victims(90, False, same_team, vprio, vborrowed, quotas=False).tolist() == [True, True, True, False, False]


def test_victims_lose_least_work():
    # 3 nodes of 8 cards; the task needs 4 cards on 1 node. Node 0 holds victims 0 (4 cards, 600
    # card-seconds since its checkpoint) and 1 (4 cards, 200); node 1 victim 2 (8 cards, 100) which
    # is not eligible; node 2 victims 3 (2 cards, 50) and 4 (2 cards, 60), 2 cards free there.
    need = np.array([4.0])
    usable = np.array([[0.0], [0.0], [2.0]])
    nodes = [[0], [0], [1], [2], [2]]
    frees = np.array([[4.0], [4.0], [8.0], [2.0], [2.0]])
    cost = np.array([600.0, 200.0, 100.0, 50.0, 60.0])
    eligible = np.array([True, True, False, True, True])
    feasible = np.ones(3, bool)
    # node 2: 2 free + victim 3 (2 cards, 50) = 4 -> cost 50; node 0: victim 1 -> 200; node 1: none
    assert choose_victims(need, 1, usable, feasible, nodes, frees, cost, eligible) == ([2], [3], 50.0)
    # a gang of 2: nodes 2 (50) and 0 (200)
    assert choose_victims(need, 2, usable, feasible, nodes, frees, cost, eligible) == ([2, 0], [1, 3], 250.0)
    # a gang of 3 cannot be made room for (node 1's only victim is not eligible)
    assert choose_victims(need, 3, usable, feasible, nodes, frees, cost, eligible) is None
    # a node the task cannot run on is never cleared
    assert choose_victims(need, 1, usable, np.array([True, True, False]), nodes, frees, cost, eligible) == ([0], [1], 200.0)
    # per-node rules: on node 2 nothing may be taken (row 1), so node 0 it is
    rows = np.stack([eligible, np.zeros(5, bool)])
    assert choose_victims(need, 1, usable, feasible, nodes, frees, cost, rows, np.array([0, 0, 1])) == ([0], [1], 200.0)
    # room already free costs nothing
    assert choose_victims(np.array([2.0]), 1, usable, feasible, nodes, frees, cost, eligible) == ([2], [], 0.0)


def test_any_column_is_the_last():
    assert ANY == -1 and usage([0], [0], [3], 1, 2)[0, ANY] == 3
