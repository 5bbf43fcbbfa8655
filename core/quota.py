"""Sharing one pool between teams: quota use, borrowing, dominant-resource fairness, the queue order
and the choice of preemption victims. Arrays in, arrays out.

Quotas are cards per team and accelerator class, with one more column for the team's cards of any
class (``ANY``: the last column of every [T, C + 1] array). A team's *guaranteed* cards are its own:
nobody may take them from it while it uses them. Up to its *maximum* it may borrow what others leave
idle; the cards it holds beyond its guarantee are borrowed, and the tasks holding them (the newest
first: the ones placed after its guarantee was full) can be reclaimed — preempted — when a team within
its guarantee needs them.

Fairness is dominant-resource fairness (Ghodsi et al., NSDI 2011) over the card classes: a team's
dominant share is the largest share it holds of any class; among tasks of one priority the queue
serves the team with the smallest share first.
"""

from __future__ import annotations

import numpy as np

ANY = -1  # the column of cards of any class


def usage(team: np.ndarray, cls: np.ndarray, cards: np.ndarray, n_teams: int, n_classes: int) -> np.ndarray:
    """float[T, C + 1]: cards held per team and class, and per team in all (the last column).
    ``team``/``cls``/``cards`` per running task (a gang: its cards on all its nodes; ``team`` -1: a
    task of no quota team, counted nowhere)."""
    team, cls = np.asarray(team, np.int64), np.asarray(cls, np.int64)
    cards = np.asarray(cards, np.float64)
    out = np.zeros((n_teams, n_classes + 1))
    ok = team >= 0
    np.add.at(out, (team[ok], cls[ok]), cards[ok])
    out[:, ANY] = out[:, :n_classes].sum(axis=1)
    return out


def borrowed(team: np.ndarray, cls: np.ndarray, cards: np.ndarray, placed_at: np.ndarray,
             guaranteed: np.ndarray) -> np.ndarray:
    """bool[N]: the running tasks that hold borrowed cards. Per team, in placement order, a task
    borrows when the cards held so far with its own exceed the team's guarantee of its class or of
    any class (a task straddling the guarantee borrows)."""
    team, cls = np.asarray(team, np.int64), np.asarray(cls, np.int64)
    cards = np.asarray(cards, np.float64)
    guaranteed = np.asarray(guaranteed, np.float64)
    out = np.zeros(team.size, bool)
    order = np.lexsort((np.arange(team.size), np.asarray(placed_at, np.float64)))
    held = np.zeros_like(guaranteed)
    for i in order:
        t = team[i]
        if t < 0:
            continue
        held[t, cls[i]] += cards[i]
        held[t, ANY] += cards[i]
        out[i] = held[t, cls[i]] > guaranteed[t, cls[i]] or held[t, ANY] > guaranteed[t, ANY]
    return out


def within_maximum(team: int, need_cards: float, node_cls: np.ndarray, use: np.ndarray,
                   maximum: np.ndarray) -> np.ndarray:
    """bool[N]: nodes whose class the team may take ``need_cards`` more cards of (its maximum of the
    class and of any class). A task of no quota team (``team`` -1) may take any."""
    node_cls = np.asarray(node_cls, np.int64)
    if team < 0:
        return np.ones(node_cls.size, bool)
    room = maximum[team, :-1] - use[team, :-1]
    total = maximum[team, ANY] - use[team, ANY]
    return (room[node_cls] >= need_cards) & (total >= need_cards)


def within_guarantee(team: int, need_cards: float, cls: int, use: np.ndarray, guaranteed: np.ndarray) -> bool:
    """Whether ``need_cards`` more cards of class ``cls`` keep the team within its guarantee."""
    if team < 0:
        return False
    return bool(use[team, cls] + need_cards <= guaranteed[team, cls]
                and use[team, ANY] + need_cards <= guaranteed[team, ANY])


def dominant_shares(use: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """float[T]: each team's largest share of any class's cards (classes without cards ignored)."""
    use = np.asarray(use, np.float64)[:, :-1]
    cap = np.asarray(capacity, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(cap > 0, use / np.where(cap > 0, cap, 1.0), 0.0)
    return share.max(axis=1) if share.size else np.zeros(use.shape[0])


def response_ratio(waited_s: np.ndarray, run_s: np.ndarray) -> np.ndarray:
    """float64: (wait + predicted run) / predicted run, the order of highest response ratio next (Brinch
    Hansen, "Short-term scheduling in multiprogramming systems", SOSP 1971): a short task goes before
    a long one that waited as long, and every task's ratio grows while it waits, so none starves.
    Runs below one second count as one. Worked: waited 1,000 s, run 100 s -> 11; waited 40,000 s,
    run 36,000 s -> 2.11; waited 0 -> 1."""
    run = np.maximum(np.asarray(run_s, np.float64), 1.0)
    return (np.asarray(waited_s, np.float64) + run) / run


def queue_order(priority: np.ndarray, share: np.ndarray, waited_s: np.ndarray, max_wait_s: float,
                run_s: np.ndarray | None = None) -> np.ndarray:
    """Service order of the queue. Without ``run_s`` (first come, first served): starving tasks
    (waited at least ``max_wait_s``) first, longest wait first; then priority (high first), then the
    team's dominant share (small first), then wait (long first), then arrival. With each task's
    predicted run ``run_s`` (highest response ratio next, :func:`response_ratio`): a task starves once
    it waited ``max_wait_s`` and as long as it would run (ratio at least 2); starving tasks first,
    then priority, then share, each by highest ratio, then arrival."""
    priority = np.asarray(priority, np.float64)
    share = np.asarray(share, np.float64)
    waited = np.asarray(waited_s, np.float64)
    idx = np.arange(priority.size)
    starving = starving_tasks(waited, max_wait_s, run_s)
    rank = waited if run_s is None else response_ratio(waited, run_s)
    # lexsort: the last key is the primary one
    return np.lexsort((idx, -rank, share, -np.where(starving, 0.0, priority),
                       -np.where(starving, rank, -1.0), ~starving))


def starving_tasks(waited_s: np.ndarray, max_wait_s: float, run_s: np.ndarray | None = None) -> np.ndarray:
    """bool: the tasks :func:`queue_order` serves first whatever their priority — waited at least
    ``max_wait_s`` and, with predicted runs ``run_s``, at least as long as they would run."""
    waited = np.asarray(waited_s, np.float64)
    starving = waited >= max_wait_s
    return starving if run_s is None else starving & (waited >= np.asarray(run_s, np.float64))


def deadline_wait(waited_s: np.ndarray, slack_s: np.ndarray, max_wait_s: float) -> np.ndarray:
    """float64: the wait a queued task is ordered by, deadlines kept. ``slack_s``: for a deferrable
    task, its deadline less now less the time it still needs (NaN: no deadline). Once the slack is
    down to ``max_wait_s`` the task counts as starving (first in the queue), and the nearer its
    deadline the earlier: ``max(waited, 2 x max_wait - slack)``. Worked (max wait 600 s): slack 100 s
    and waited 30 s -> 1,100 s (starving, ahead of one that waited 1,000 s); slack 700 s -> 30 s."""
    waited = np.asarray(waited_s, np.float64)
    slack = np.asarray(slack_s, np.float64)
    with np.errstate(invalid="ignore"):
        due = slack <= max_wait_s
    return np.where(due, np.maximum(waited, 2.0 * max_wait_s - np.nan_to_num(slack)), waited)


def eligible_victims(priority: int, reclaiming: bool, same_team: np.ndarray, victim_priority: np.ndarray,
                     victim_borrowed: np.ndarray, quotas: bool) -> np.ndarray:
    """bool[N]: the running tasks a task of ``priority`` may preempt. Borrowed work may be reclaimed
    by a team within its guarantee (``reclaiming``) or taken by a higher priority; work within its
    team's guarantee only by a higher priority of the same team (without quotas: of any team).
    Never a task of equal or higher priority that holds its own quota."""
    vp = np.asarray(victim_priority, np.float64)
    lower = vp < priority
    b = np.asarray(victim_borrowed, bool)
    own = np.asarray(same_team, bool) | (not quotas)
    return (b & (reclaiming | lower)) | (~b & lower & own)


def choose_victims(need: np.ndarray, peers: int, usable: np.ndarray, feasible: np.ndarray,
                   victim_nodes: list[list[int]], victim_frees: np.ndarray, victim_cost: np.ndarray,
                   eligible: np.ndarray, node_rule: np.ndarray | None = None
                   ) -> tuple[list[int], list[int], float] | None:
    """The cheapest set of victims that makes room for a task on ``peers`` distinct nodes.

    ``need`` float[R] per node; ``usable`` float[N, R] free now; ``feasible`` bool[N] nodes the task
    could run on if room were made; per running task ``victim_nodes`` (its nodes), ``victim_frees``
    float[V, R] (what it holds on each of them), ``victim_cost`` float[V] (the work it loses, e.g.
    cards x seconds since its last checkpoint) and ``eligible`` bool[V] — or bool[K, V] with
    ``node_rule`` int[N] naming the row that holds on each node (the task may reclaim on one class
    and not on another). Per node, eligible victims there go cheapest first until the task fits; the
    ``peers`` cheapest nodes win. Returns (nodes, victims, total cost), or None when no set makes room."""
    need = np.asarray(need, np.float64)
    usable = np.asarray(usable, np.float64)
    cost = np.asarray(victim_cost, np.float64)
    frees = np.asarray(victim_frees, np.float64)
    eligible = np.atleast_2d(np.asarray(eligible, bool))
    rule = np.zeros(usable.shape[0], np.int64) if node_rule is None else np.asarray(node_rule, np.int64)
    on_node: dict[int, list[int]] = {}
    for v, nodes in enumerate(victim_nodes):
        for n in nodes:
            on_node.setdefault(n, []).append(v)
    plans = []  # (cost, node, victims)
    for n in np.flatnonzero(feasible):
        room, taken, total = usable[n].copy(), [], 0.0
        here = [v for v in on_node.get(int(n), []) if eligible[rule[n], v]]
        for v in sorted(here, key=lambda v: (cost[v], v)):
            if (room >= need).all():
                break
            room += frees[v]
            taken.append(v)
            total += cost[v]
        if (room >= need).all():
            plans.append((total, int(n), taken))
    if len(plans) < peers:
        return None
    plans.sort(key=lambda p: (p[0], p[1]))
    chosen = plans[:peers]
    victims = sorted({v for _, _, vs in chosen for v in vs})
    return [n for _, n, _ in chosen], victims, float(cost[victims].sum()) if victims else 0.0
