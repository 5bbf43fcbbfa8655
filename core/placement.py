"""Placement: filter -> score -> rank -> reserve, with fallback, gangs, priorities and a margin.

- rank: feasible nodes by composite, best first; ties go to the lower node index (deterministic);
- reserve: the caller's ``reserve(node) -> bool`` (the state may be seconds old: a node can refuse);
  a refusal is recorded as a fallback and the next candidate is tried;
- gangs: a job of ``gang`` workers takes ``gang`` distinct nodes or none. The others are ranked by
  ``alpha x compute + (1 - alpha) x quality to the first`` (co-workers want a good path to each
  other). The first worker goes to the node that leads the best whole gang among the ``lookahead``
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

import numpy as np

from core.energy import blend


@dataclass
class Placement:
    nodes: list[int] = field(default_factory=list)
    fallbacks: list[tuple[int, str]] = field(default_factory=list)

    @property
    def placed(self) -> bool:
        return bool(self.nodes)


def rank(scores: np.ndarray) -> np.ndarray:
    """Feasible node indices (finite score), best first, ties by lower index."""
    idx = np.flatnonzero(np.isfinite(scores))
    return idx[np.argsort(-scores[idx], kind="stable")]  # stable: ties keep the lower index first


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """``rank(scores)[:k]`` without sorting every node: the k best (ties at the k-th included before
    the final sort), O(N) plus O(k log k)."""
    idx = np.flatnonzero(np.isfinite(scores))
    if k <= 0:
        return idx[:0]
    if idx.size > 4 * k:
        v = scores[idx]
        kth = v[np.argpartition(-v, k - 1)[k - 1]]
        idx = idx[v >= kth]
    return idx[np.argsort(-scores[idx], kind="stable")][:k]


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
    peer_scores: Callable[[int], np.ndarray] | None = None,
    lookahead: int = 8,
) -> Placement:
    """Place one job (``scores``: its composite per node, -inf where infeasible).

    ``usable`` (float[N, R]) is updated in place for the nodes taken. ``peer_scores(first)`` gives
    the scores of the other gang workers once the first is placed (default: ``scores``).
    """
    result = Placement()
    reserve = reserve or (lambda n: True)
    refused: set[int] = set()
    others_of = functools.cache(peer_scores or (lambda first: scores))  # each first's peers, once

    def take(values: np.ndarray, exclude: set[int]) -> int | None:
        """The best node by ``values`` that fits now and reserves (best first, ties by index)."""
        fits = np.isfinite(values) & np.all(usable >= need, axis=1)
        fits[list(exclude | refused)] = False
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
                result.fallbacks.append((n, "reservation_failed"))
            if batch.size < k:
                return None
            k *= 4

    ahead = gang > 1 and peer_scores is not None and lookahead > 1
    first = take(_leads(scores, usable, need, gang, others_of, lookahead), set()) if ahead else None
    first = take(scores, set()) if first is None else first
    if first is None:
        return result
    chosen = [first]
    if gang > 1:
        order = np.where(np.isfinite(scores), others_of(first), -np.inf)
        while len(chosen) < gang:
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


def _leads(scores: np.ndarray, usable: np.ndarray, need: np.ndarray, gang: int,
           others_of: Callable[[int], np.ndarray], k: int) -> np.ndarray:
    """float64[N]: for the ``k`` best nodes that fit, the value (``gang_value``) of the best gang each
    would lead with what fits now; -inf for every other node and for a node that cannot lead a full
    gang."""
    fits = np.isfinite(scores) & np.all(usable >= need, axis=1)
    lead = np.full(scores.shape, -np.inf)
    for c in top(np.where(fits, scores, -np.inf), k):
        c = int(c)
        peer = others_of(c)
        cand = fits.copy()
        cand[c] = False
        rest = top(np.where(cand, peer, -np.inf), gang - 1)
        if rest.size == gang - 1:
            lead[c] = gang_value(scores, peer, [c, *(int(m) for m in rest)])
    return lead


def gang_value(scores: np.ndarray, peer: np.ndarray, members: list[int]) -> float:
    """What a gang placement is worth, as ``place`` builds it: the first member's composite and
    each other member's peer score (``peer``: ``peer_scores(first)``), averaged."""
    if not members:
        return float("-inf")
    first, rest = members[0], members[1:]
    return float((scores[first] + sum(float(peer[m]) for m in rest)) / len(members))


def peer_scores(alpha: float, compute: np.ndarray, quality_to_first: np.ndarray, unknown_quality: float,
                energy: np.ndarray | None = None, cost_sensitivity: float = 0.0) -> np.ndarray:
    """float64[N]: what each node is worth as a gang member once the first member is placed:
    ``alpha x compute + (1 - alpha) x quality to the first`` (unknown paths at ``unknown_quality``),
    with the task's energy preference mixed in (core.energy.blend) when it has one."""
    q = np.where(np.isnan(quality_to_first), unknown_quality, quality_to_first).astype(np.float64)
    peer = alpha * np.asarray(compute, np.float64) + (1 - alpha) * q
    if cost_sensitivity > 0 and energy is not None:
        return blend(peer[None, :], [cost_sensitivity], energy)[0]
    return peer
