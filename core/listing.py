"""What a decision lists of one task's nodes, in one compiled pass over them (the decision record is
a fifth of a decision's time when assembled from a dozen array calls, each reading every node):

- the ``k`` nodes of best composite (finite only, ties to the lower index: core.placement.top), with
  the parts a candidate shows at each, rounded as Python's ``round(v, places)`` (core.rounding);
- the compute-only choice: the ``g`` best nodes by the compute-only scores among the nodes that pass
  every filter (core.placement.top_where where the reason is FEASIBLE);
- the nodes the filters rejected: how many have each reason, and the first ``listed`` of each reason
  but FEASIBLE, in node order (core.scoring.listed_reasons).

:func:`listing_reference` composes those functions; the tests hold the two together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from core.placement import _SMALL_K, kept, top, top_where
from core.rounding import round_one, round_places
from core.scoring import FEASIBLE, REASONS, listed_reasons

MAX_PARTS = 4  # the parts a candidate shows: compute, composite, network, energy


@dataclass
class Listing:
    top: np.ndarray  # int64[m] the nodes of best composite, best first (m <= k)
    table: np.ndarray  # float64[P, m] each part at those nodes, rounded
    compute_only: np.ndarray  # int64[c] the compute-only choice, best first
    counts: np.ndarray  # int64[len(REASONS)] nodes per reason
    rejected: np.ndarray  # int64[r] the rows named per reason, in node order


def listing(composite: np.ndarray, parts: list[np.ndarray], k: int, reasons: np.ndarray, listed: int,
            compute_only: np.ndarray | None = None, g: int = 0, places: int = 4) -> Listing:
    """The :class:`Listing` of a task (see the module): ``parts`` (up to :data:`MAX_PARTS` float
    arrays [N], the composite among them or not) are gathered at the top nodes; ``compute_only``
    (float[N]; None: not asked) ranked among the nodes whose reason is FEASIBLE, ``g`` of them."""
    if not 0 <= len(parts) <= MAX_PARTS or not 0 < k <= _SMALL_K:
        raise ValueError(f"listing: {len(parts)} parts (at most {MAX_PARTS}), k={k} (1..{_SMALL_K})")
    reasons = np.asarray(reasons, np.int8)
    co = np.zeros(0, np.float64) if compute_only is None or g > _SMALL_K else np.asarray(compute_only)
    none = np.zeros(0, np.float64)
    padded = [np.asarray(p) for p in parts] + [none] * (MAX_PARTS - len(parts))
    top_i, table, unsure, co_i, counts, rejected = _listing(
        np.asarray(composite), k, co, g if co.size else 0, reasons, len(REASONS), listed, *padded,
        len(parts), float(10.0 ** places))
    for r, q in zip(*np.nonzero(unsure), strict=True):  # Python's own round (core.rounding)
        table[r, q] = round(float(parts[r][top_i[q]]), places)
    if compute_only is not None and g > _SMALL_K:  # a gang wider than the pass keeps: the array form
        co_i = top_where(compute_only, reasons == FEASIBLE, g)
    return Listing(top_i, table, co_i, counts, rejected)


@nb.njit(cache=True)
def _listing(composite, k, co, g, reasons, codes, listed, p0, p1, p2, p3, n_parts, scale):  # pragma: no cover
    n = composite.shape[0]  # compiled (tested against listing_reference)
    top_i, top_v = np.empty(k, np.int64), np.empty(k, np.float64)
    co_i, co_v = np.empty(g, np.int64), np.empty(g, np.float64)
    counts = np.zeros(codes, np.int64)
    rejected = np.empty(min(n, (codes - 1) * listed), np.int64)
    m = c = r = feasible = 0
    for i in range(n):
        v = composite[i]
        if np.isfinite(v) and (m < k or v > top_v[k - 1]):  # an equal score at a higher index ranks after
            m = kept(top_i, top_v, m, i, v)
        why = reasons[i]
        if why == FEASIBLE:  # counted in a register: most nodes, no chain of stores to one count
            feasible += 1
            v = co[i] if g else np.nan
            if np.isfinite(v) and (c < g or v > co_v[g - 1]):
                c = kept(co_i, co_v, c, i, v)
            continue
        counts[why] += 1
        if counts[why] <= listed:
            rejected[r] = i
            r += 1
    counts[FEASIBLE] = feasible
    table = np.empty((n_parts, m))
    unsure = np.zeros((n_parts, m), np.bool_)
    for q in range(m):
        i = top_i[q]
        for p in range(n_parts):
            v = p0[i] if p == 0 else p1[i] if p == 1 else p2[i] if p == 2 else p3[i]
            table[p, q], unsure[p, q] = round_one(np.float64(v), scale)
    return top_i[:m], table, unsure, co_i[:c], counts, rejected[:r]


def listing_reference(composite: np.ndarray, parts: list[np.ndarray], k: int, reasons: np.ndarray, listed: int,
                      compute_only: np.ndarray | None = None, g: int = 0, places: int = 4) -> Listing:
    """:func:`listing` from the functions it fuses, one after another."""
    idx = top(np.asarray(composite), k)
    table = round_places(np.array([np.asarray(p, np.float64)[idx] for p in parts]).reshape(len(parts), idx.size),
                         places)
    co = top_where(compute_only, np.asarray(reasons) == FEASIBLE, g) if compute_only is not None and g > 0 \
        else np.zeros(0, np.int64)
    counts, rejected = listed_reasons(reasons, listed)
    return Listing(idx, table, co, counts, rejected)
