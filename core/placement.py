"""Placement: filter -> score -> rank -> reserve, with fallback, gangs, priorities and a margin.

- rank: feasible nodes by composite, best first; ties go to the lower node index (deterministic);
- reserve: the caller's ``reserve(node) -> bool`` (the state may be seconds old: a node can refuse);
  a refusal is recorded as a fallback and the next candidate is tried;
- gangs: a job of ``gang`` workers takes ``gang`` distinct nodes or none. Each next worker is ranked
  by ``alpha x compute + (1 - alpha) x its mean quality to the workers chosen so far`` (co-workers
  want a good path to each other: the seeds score a data-parallel job by its quality to all
  co-workers), and a whole gang is valued by every member's quality to all the others. The first worker goes to the node that leads the best whole gang among the ``lookahead``
  best nodes for the job (a node whose rack has room for its co-workers beats an equal one whose
  co-workers would sit across the fabric); when none of those can lead a full gang, to the best node.
  If the gang cannot be completed every reservation made for it is released (``unreserve``);
- priorities: the queue's order is core.quota.queue_order (starving first, then priority, then the
  team's fair share, then wait);
- every reservation subtracts the job's needs from ``usable`` so later jobs see what is left.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from core.energy import blend
from core.feasibility import covers


@dataclass
class Placement:
    nodes: list[int] = field(default_factory=list)
    fallbacks: list[tuple[int, str]] = field(default_factory=list)
    expected_s: float = float("nan")  # by the seconds rule: the expected wait + load + run there (core.ect)
    waits_for: list[int] = field(default_factory=list)  # not placed: the set it waits for, which frees later

    @property
    def placed(self) -> bool:
        return bool(self.nodes)


def rank(scores: np.ndarray) -> np.ndarray:
    """Feasible node indices (finite score), best first, ties by lower index."""
    idx = np.flatnonzero(np.isfinite(scores))
    return idx[np.argsort(-scores[idx], kind="stable")]  # stable: ties keep the lower index first


def ranked(order: np.ndarray, n: int) -> np.ndarray:
    """float64[n]: scores for :func:`place` that rank ``order`` (node rows) first to last and rule out
    every other node. Worked: order [2, 0] of 3 -> [1, -inf, 2]."""
    scores = np.full(n, -np.inf)
    scores[np.asarray(order, np.int64)] = np.arange(len(order), 0, -1, dtype=np.float64)
    return scores


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """``rank(scores)[:k]`` without sorting every node: one pass keeping the k best (ties to the
    lower index) for a small k, a partition and a sort of the k best beyond it."""
    if k <= 0:
        return np.zeros(0, np.int64)
    scores = np.asarray(scores)
    if k <= _SMALL_K and scores.dtype.kind == "f":
        return _top_small(scores, _EVERY, k)
    idx = np.flatnonzero(np.isfinite(scores))
    if idx.size > 4 * k:
        v = scores[idx]
        kth = v[np.argpartition(-v, k - 1)[k - 1]]
        idx = idx[v >= kth]
    return idx[np.argsort(-scores[idx], kind="stable")][:k]


def top_where(scores: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray:
    """``top(np.where(ok, scores, -inf), k)`` without the masked copy (``ok`` bool[N])."""
    scores = np.asarray(scores)
    if 0 < k <= _SMALL_K and scores.dtype.kind == "f":
        return _top_small(scores, np.asarray(ok, np.bool_), k)
    return top(np.where(ok, scores, -np.inf), k)


_SMALL_K = 64
_EVERY = np.zeros(0, np.bool_)  # _top_small's ``ok`` when every node may be taken


@nb.njit(cache=True)
def _top_small(scores, ok, k):  # pragma: no cover - compiled (tested against rank)
    best_i = np.empty(k, np.int64)
    best_v = np.empty(k, np.float64)
    m = 0
    for i in range(scores.shape[0]):
        v = scores[i]
        if (ok.size and not ok[i]) or not np.isfinite(v) or (m == k and v <= best_v[k - 1]):
            continue  # an equal score at a higher index ranks after the ones kept
        m = kept(best_i, best_v, m, i, v)
    return best_i[:m]


@nb.njit(cache=True)
def kept(best_i, best_v, m, i, v):  # pragma: no cover - compiled
    """Node ``i`` of score ``v`` (finite, above the k-th kept or fewer than k kept) into the ``m``
    best kept so far (``best_v`` descending, room for k; ties: the one kept first ranks first): the
    count kept after (core.listing shares it)."""
    k = best_i.shape[0]
    j = m if m < k else k - 1
    while j > 0 and best_v[j - 1] < v:
        best_v[j] = best_v[j - 1]
        best_i[j] = best_i[j - 1]
        j -= 1
    best_v[j] = v
    best_i[j] = i
    return min(m + 1, k)


def best_group(scores: np.ndarray, groups: np.ndarray, fits: np.ndarray, k: int) -> int | None:
    """The group (a rack, a zone: ``groups`` int[N] codes, -1 none) whose ``k`` best fitting nodes have
    the highest total score — where a gang that must stay together goes — or None when no group has
    ``k`` fitting nodes. Ties go to the lower code."""
    ok = fits & np.isfinite(scores) & (groups >= 0)
    best, best_total = None, -np.inf
    for g in np.unique(groups[ok]).tolist():
        v = np.sort(scores[ok & (groups == g)])[::-1]
        if v.size >= k and v[:k].sum() > best_total:
            best, best_total = g, float(v[:k].sum())
    return best


def place(
    scores: np.ndarray,
    need: np.ndarray,
    usable: np.ndarray,
    gang: int = 1,
    reserve: Callable[[int], bool] | None = None,
    unreserve: Callable[[int], None] | None = None,
    peer_scores: Callable[[tuple[int, ...]], np.ndarray] | None = None,
    lookahead: int = 8,
    value_of: Callable[[list[int]], float] | None = None,
    leads: Callable[[np.ndarray, np.ndarray, int, int], np.ndarray] | None = None,
) -> Placement:
    """Place one job (``scores``: its composite per node, -inf where infeasible).

    ``usable`` (float[N, R]) is updated in place for the nodes taken. ``peer_scores(chosen)`` gives
    what every node is worth as the next gang worker once ``chosen`` (a tuple of node rows) are
    placed — its quality to all of them, the seeds' rule (default: ``scores``); ``value_of(members)``
    what a whole gang is worth (default: :func:`gang_value` over the members' peer scores), by which
    the look-ahead picks the first worker. ``leads(scores, fits, lookahead, gang)``: that look-ahead
    computed by the caller for its own peer scores and value, the values :func:`_leads` gives over
    them (core.gang: compiled).
    """
    result = Placement()
    refused: set[int] = set()
    others_of = functools.cache(peer_scores or (lambda chosen: scores))  # each set of chosen's peers, once

    def take(values: np.ndarray, exclude: set[int]) -> int | None:
        return _take(values, exclude | refused, usable, need, reserve or (lambda n: True), refused, result.fallbacks)

    def value(members: list[int]) -> float:
        if value_of is not None:
            return value_of(members)
        return gang_value(scores, others_of((members[0],)), members)

    ahead = gang > 1 and peer_scores is not None and lookahead > 1
    if ahead and leads is not None:
        first = take(leads(scores, np.isfinite(scores) & covers(usable, need), lookahead, gang), set())
    else:
        first = take(_leads(scores, usable, need, gang, others_of, lookahead, value), set()) if ahead else None
    first = take(scores, set()) if first is None else first
    if first is None:
        return result
    chosen = [first]
    while len(chosen) < gang:
        order = np.where(np.isfinite(scores), others_of(tuple(chosen)), -np.inf)
        n = take(order, set(chosen))
        if n is None:
            for m in chosen:  # all or nothing
                usable[m] += need
                if unreserve is not None:
                    unreserve(m)
            result.fallbacks.append((-1, f"gang incomplete: {len(chosen)} of {gang} workers placed"))
            return result
        chosen.append(n)
    result.nodes = chosen
    return result


def _take(values: np.ndarray, exclude: set[int], usable: np.ndarray, need: np.ndarray,
          reserve: Callable[[int], bool], refused: set[int], fallbacks: list) -> int | None:
    """The best node by ``values`` that fits now and reserves (best first, ties by index); taken
    from ``usable``; a node that refuses joins ``refused`` and ``fallbacks``."""
    fits = np.isfinite(values) & covers(usable, need)
    fits[list(exclude)] = False
    masked = np.where(fits, values, -np.inf)
    k = 8
    while True:
        batch = top(masked, k)
        for n in batch:
            n = int(n)
            if reserve(n):
                usable[n] -= need
                return n
            refused.add(n)
            masked[n] = -np.inf
            fallbacks.append((n, "reservation_failed"))
        if batch.size < k:
            return None
        k *= 4


def _leads(scores: np.ndarray, usable: np.ndarray, need: np.ndarray, gang: int,
           others_of: Callable[[tuple[int, ...]], np.ndarray], k: int,
           value: Callable[[list[int]], float]) -> np.ndarray:
    """float64[N]: for the ``k`` best nodes that fit, the value of the best gang each would lead
    with what fits now (built as ``place`` builds it: each next worker the best by its quality to
    those chosen so far); -inf for every other node and for a node that cannot lead a full gang."""
    fits = np.isfinite(scores) & covers(usable, need)
    lead = np.full(scores.shape, -np.inf)
    for c in top(np.where(fits, scores, -np.inf), k):
        members = [int(c)]
        cand = fits.copy()
        cand[members[0]] = False
        while len(members) < gang:
            v = np.where(cand, others_of(tuple(members)), -np.inf)
            nxt = int(np.argmax(v))  # the best, ties to the lower index (as top)
            if not np.isfinite(v[nxt]):
                break
            members.append(nxt)
            cand[nxt] = False
        if len(members) == gang:
            lead[members[0]] = value(members)
    return lead


def gang_value(scores: np.ndarray, peer: np.ndarray, members: list[int]) -> float:
    """What a gang placement is worth: the first member's composite and each other member's peer
    score (``peer[m]``), averaged."""
    if not members:
        return float("-inf")
    first, rest = members[0], members[1:]
    return float((scores[first] + sum(float(peer[m]) for m in rest)) / len(members))


def pair_means(q: np.ndarray, unknown_quality: float) -> np.ndarray:
    """float64[k]: each gang member's mean path quality to the other members — ``q[j, i]`` the
    quality from member j to member i (NaN: unknown, taken as ``unknown_quality``); the seeds' rule
    scores a data-parallel worker by its quality to all its co-workers. A gang of one: unknown.
    Worked: q = [[100, 80, 20], [80, 100, 60], [20, 60, 100]] -> [50, 70, 40]."""
    q = np.where(np.isnan(q), unknown_quality, np.asarray(q, np.float64))
    k = q.shape[0]
    if k < 2:
        return np.full(k, unknown_quality)
    return (q.sum(axis=0) - np.diagonal(q)) / (k - 1)


def packed(scores: np.ndarray, left: np.ndarray, band: float) -> np.ndarray:
    """Scores that rank by best fit within ``band`` points of the best (Slurm's weight tiers, then
    best fit): the nodes there first, the one with the fewest cards ``left`` after the task first,
    ties by score then index; every other node after them by its score. ``band`` 0: ``scores``.
    Worked: scores [90, 80, 60], cards left [7, 1, 0], band 20 -> node 1, then node 0, then node 2."""
    scores = np.asarray(scores, np.float64)
    ok = np.isfinite(scores)
    if band <= 0 or not ok.any():
        return scores
    tier = ok & (scores >= scores[ok].max() - band)
    # fewer cards left ranks higher; a score (0-100) only orders nodes that leave as many
    return np.where(tier, 1e9 - np.asarray(left, np.float64) * 1e3 + scores, scores)


def closest_quality(row: np.ndarray, ok: np.ndarray, lead: int, k: int) -> float:
    """The mean of the ``k`` best qualities in ``row`` (a lead's quality to every node) over the
    nodes ``ok`` other than ``lead``: how close a gang led from there could be (NaN when fewer than
    ``k`` nodes are ok). Worked: row [100, 95, 60, 90], ok all, lead 0, k 2 -> (95 + 90) / 2 = 92.5."""
    v = np.asarray(row, np.float64)[np.flatnonzero(ok)]
    v = v[np.flatnonzero(ok) != lead]
    if k <= 0 or v.size < k:
        return float("nan")
    return float(np.sort(v)[-k:].mean())


def peer_scores(alpha: float, compute: np.ndarray, quality_to_first: np.ndarray, unknown_quality: float,
                energy: np.ndarray | None = None, cost_sensitivity: float = 0.0) -> np.ndarray:
    """float64[N]: what each node is worth as a gang member: ``alpha x compute + (1 - alpha) x
    quality`` — its quality to the members already chosen (their mean; unknown paths at
    ``unknown_quality``) — with the task's energy preference mixed in (core.energy.blend) when it
    has one."""
    q = np.where(np.isnan(quality_to_first), unknown_quality, quality_to_first).astype(np.float64)
    peer = alpha * np.asarray(compute, np.float64) + (1 - alpha) * q
    if cost_sensitivity > 0 and energy is not None:
        return blend(peer[None, :], [cost_sensitivity], energy)[0]
    return peer


def topology_pick(ok: np.ndarray, n: int, site: np.ndarray, rack: np.ndarray) -> list[int]:
    """The topology-aware baseline (what Slurm's topology plugin or Volcano's network tiers do): fewest
    sites, then fewest racks, best fit (the fullest group that still holds the job),
    lowest node index first. ``ok``: the nodes that fit one member; ``site``/``rack`` theirs."""
    for groups in (rack, site):
        ids, counts = np.unique(groups, return_counts=True)
        fits = ids[counts >= n]
        if fits.size:
            best = fits[np.argmin(counts[counts >= n])]
            inside = groups == best
            # inside the group, the best-stocked racks first (fewest racks), then the lower index
            order = np.lexsort((ok[inside], -np.bincount(rack)[rack[inside]]))
            return sorted(int(x) for x in ok[inside][order][:n])
    order = np.lexsort((ok, -np.bincount(rack)[rack], -np.bincount(site)[site]))  # best-stocked sites, racks
    return sorted(int(x) for x in ok[order][:n])


def topology_scores(fits: np.ndarray, gang: int, site: np.ndarray, rack: np.ndarray, home: int,
                    left: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """The topology-aware baseline as an operator configures it (Slurm's topology/tree plugin, Volcano
    HyperNodes, Kueue topology-aware scheduling), as scores for :func:`place`: -inf outside the group
    it picks, ``1..k`` inside, the best highest. Codes are only compared for equality: order comes
    from the node index (the caller's node order), never from a code or a name.

    ``fits``: bool[N] nodes that hold one member; ``site``/``rack``: int codes (racks unique across
    sites); ``home``: the site code of the job's data (-1: none); ``left``: cards a node keeps after
    taking a member; ``speed``: its card's compute score. A gang goes into one rack if one holds it,
    else into one site, never across sites (it waits: all -inf): the data's site first, then the
    fullest group that holds it (best fit), then the group with the lowest node. Inside: nodes at
    the data's site first, then faster cards, then best fit (fewest cards left), then for a gang the
    rack with the most fitting nodes (fewest racks), for one node the one with the fewest (what
    Slurm's tree plugin does: keep whole racks for gangs), then the lower index.
    """
    out = np.full(fits.size, -np.inf)
    ok = np.flatnonzero(fits)
    if ok.size < gang:
        return out
    if gang > 1:
        for level in (rack, site):
            ids, counts = np.unique(level[ok], return_counts=True)
            holds = counts >= gang
            if holds.any():
                ids, counts = ids[holds], counts[holds]
                first = np.array([ok[level[ok] == g][0] for g in ids])  # a group's lowest node
                best = ids[np.lexsort((first, counts, site[first] != home))[0]]
                ok = ok[level[ok] == best]
                break
        else:
            return out
    stock = np.bincount(rack[ok], minlength=int(rack.max()) + 1)[rack[ok]] if ok.size else ok
    order = np.lexsort((ok, -stock if gang > 1 else stock, left[ok], -speed[ok], site[ok] != home))
    out[ok[order]] = np.arange(ok.size, 0, -1, dtype=np.float64)
    return out
