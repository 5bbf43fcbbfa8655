"""A gang's worth and its look-ahead over a matrix of member-pair qualities, compiled: what
core.placement composes from callbacks (``place``'s look-ahead, ``gang_value`` over ``pair_means``
and ``peer_scores``, ``packed``), the same values bit for bit (numpy's order of operations and
sums kept: a column sum row after row, a 1-D sum pairwise), in one call instead of dozens of small
array operations per candidate gang.

``quality[a, b]``: float64[N, N] the quality from node a to node b with unknown paths at the task's
unknown quality and 100 from a node to itself (what each member's row is, filled). ``compute``:
the task's compute part per node; ``energy``/``w``: its energy preference (``w`` 0: none). With
``band`` > 0 the packing rule (core.placement.packed) ranks every next worker, with ``left`` the
cards a node would keep and ``most`` the largest of them, and a gang's worth loses ``band`` points
for the share of cards it leaves free (GangScorer.packed).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from core.observe import _pairwise_sum
from core.placement import _top_small


@nb.njit(cache=True)
def _peer(alpha, rest, compute, q, unknown, energy, w):  # pragma: no cover - compiled
    """core.placement.peer_scores of one node (q: its mean quality to the chosen members; ``rest``:
    ``1 - alpha`` as the caller's types computed it)."""
    if math.isnan(q):
        q = unknown
    p = alpha * compute + rest * q
    if w > 0 and np.isfinite(p):  # core.energy.blend
        p = (1.0 - w) * p + w * energy
    return p


@nb.njit(cache=True)
def gang_worth(members, scores, quality, compute, alpha, rest, unknown, energy, w, left, band,
               most):  # pragma: no cover - compiled (tested against GangScorer.value)
    """GangScorer.value of ``members`` (int64[k]): the first member's composite (``scores``) and each
    other member's worth by its mean quality to all the others, averaged; with ``band`` > 0 less the
    packing term (GangScorer.packed's value)."""
    k = members.shape[0]
    if k == 0:
        return -np.inf
    worth = np.empty(max(k - 1, 0))
    for i in range(1, k):
        mi = members[i]
        acc = quality[members[0], mi]
        for j in range(1, k):  # numpy's sum over axis 0: row after row
            acc += quality[members[j], mi]
        worth[i - 1] = _peer(alpha, rest, compute[mi], (acc - quality[mi, mi]) / (k - 1), unknown, energy[mi], w)
    value = (scores[members[0]] + _pairwise_sum(worth, k - 1)) / k
    if band > 0:
        kept = np.empty(k)
        for i in range(k):
            kept[i] = max(left[members[i]], 0.0)
        value = value - band * (_pairwise_sum(kept, k) / k) / most
    return value


@nb.njit(cache=True)
def _next_scores(total, count, chosen, m, compute, alpha, rest, unknown, energy, w, left, band):  # pragma: no cover
    """Every node's worth as the next worker once ``chosen[:m]`` are (``total``: their quality rows
    summed in order): GangScorer.peers, and with ``band`` > 0 its packed form (chosen ones -inf)."""
    n = total.shape[0]
    p = np.empty(n)
    for i in range(n):
        p[i] = _peer(alpha, rest, compute[i], total[i] / count, unknown, energy[i], w)
    if band <= 0:
        return p
    for j in range(m):
        p[chosen[j]] = -np.inf
    best = -np.inf
    some = False
    for i in range(n):
        if np.isfinite(p[i]):
            some = True
            if p[i] > best:
                best = p[i]
    if not some:
        return p
    floor = best - band
    for i in range(n):
        if np.isfinite(p[i]) and p[i] >= floor:
            p[i] = 1e9 - left[i] * 1e3 + p[i]
    return p


@nb.njit(cache=True)
def _argmax(v):  # pragma: no cover - compiled
    """np.argmax: the first largest, the first NaN if any."""
    best = 0
    for i in range(v.shape[0]):
        if math.isnan(v[i]):
            return i
        if v[i] > v[best]:
            best = i
    return best


@nb.njit(cache=True)
def gang_leads(ranked, fits, k, gang, scores, quality, compute, alpha, rest, unknown, energy, w, left, band,
               most):  # pragma: no cover - compiled (tested against core.placement._leads)
    """core.placement._leads: for the ``k`` best nodes by ``ranked`` that ``fits``, the worth of the
    best gang each would lead (each next worker the best by its worth next to those chosen so far);
    -inf for every other node and for a node that cannot lead a full gang."""
    n = ranked.shape[0]
    lead = np.full(n, -np.inf)
    masked = np.empty(n)
    for i in range(n):
        masked[i] = ranked[i] if fits[i] else -np.inf
    members = np.empty(gang, np.int64)
    v = np.empty(n)
    for c in _top_small(masked, np.zeros(0, np.bool_), k):
        members[0] = c
        m = 1
        cand = fits.copy()
        cand[c] = False
        total = quality[c].copy()
        while m < gang:
            p = _next_scores(total, m, members, m, compute, alpha, rest, unknown, energy, w, left, band)
            for i in range(n):
                v[i] = p[i] if cand[i] else -np.inf
            nxt = _argmax(v)
            if not np.isfinite(v[nxt]):
                break
            members[m] = nxt
            m += 1
            cand[nxt] = False
            total = total + quality[nxt]
        if m == gang:
            lead[c] = gang_worth(members, scores, quality, compute, alpha, rest, unknown, energy, w, left, band,
                                 most)
    return lead
