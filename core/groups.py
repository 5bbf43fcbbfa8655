"""The first few members of each group, compiled: a gang's candidate sets per rack or site (the
``g`` nodes of each rack or site that rank first) in one pass over the nodes, instead of a sort of
every node per set kind and gang.

``group_firsts(rows, group, keys, g)``: among ``rows`` (node rows, ascending), for each group code
(``group[row]``, 0..G-1) with at least ``g`` of them, its ``g`` rows of least ``keys[:, row]``
compared as tuples (first key first; ties to the lower row); the groups in ascending code. The same
rows, in the same order, as ``firsts(rows[np.lexsort((rows, *keys[::-1][:, rows], group[rows]))])``:
:func:`group_firsts_reference` writes that out and the tests hold the two together.
"""

from __future__ import annotations

import numba as nb
import numpy as np


def group_firsts(rows: np.ndarray, group: np.ndarray, keys: np.ndarray, g: int) -> np.ndarray:
    """int64[k, g]: the first ``g`` rows of each group holding ``g`` of ``rows`` (see the module).
    ``keys``: float64[K, N] (K ≥ 1), finite where ``rows`` read them."""
    rows = np.ascontiguousarray(rows, np.int64)
    group = np.ascontiguousarray(group, np.int64)
    keys = np.ascontiguousarray(np.atleast_2d(keys), np.float64)
    n_groups = int(group.max()) + 1 if group.size else 0
    if g < 1 or rows.size < g:
        return np.zeros((0, max(g, 0)), np.int64)
    return _group_firsts(rows, group, keys, int(g), n_groups)


@nb.njit(cache=True)
def _before(keys, a, b):  # pragma: no cover - compiled
    """Whether row ``a`` ranks strictly before row ``b`` by ``keys`` (equal keys: neither)."""
    for k in range(keys.shape[0]):
        if keys[k, a] < keys[k, b]:
            return True
        if keys[k, a] > keys[k, b]:
            return False
    return False


@nb.njit(cache=True)
def _group_firsts(rows, group, keys, g, n_groups):  # pragma: no cover - compiled (tested against the reference)
    count = np.zeros(n_groups, np.int64)
    for r in rows:
        count[group[r]] += 1
    slot = np.full(n_groups, -1, np.int64)
    m = 0
    for c in range(n_groups):
        if count[c] >= g:
            slot[c] = m
            m += 1
    best = np.empty((m, g), np.int64)
    filled = np.zeros(m, np.int64)
    for r in rows:  # ascending: a row whose keys equal a kept one's ranks after it
        s = slot[group[r]]
        if s < 0:
            continue
        j = filled[s]
        while j > 0 and _before(keys, r, best[s, j - 1]):
            j -= 1
        if j >= g:
            continue
        last = filled[s] if filled[s] < g else g - 1
        for q in range(last, j, -1):
            best[s, q] = best[s, q - 1]
        best[s, j] = r
        if filled[s] < g:
            filled[s] += 1
    return best


def gang_firsts(fits: np.ndarray, g: int, rack: np.ndarray, site: np.ndarray, speed: np.ndarray, left: np.ndarray,
                pool: bool) -> tuple[np.ndarray, ...]:
    """A gang's candidate blocks now, in one compiled call (streams' gang_sets.now_sets): with ``ok``
    the rows that ``fits``, ``r_stock``/``s_stock`` each row's rack's/site's count of them —
    (ok, rack counts, site counts, each site's first ``g`` by (-r_stock, -speed, left), each rack's by
    (-speed, left), and with ``pool`` and rows in two sites or more the pool's first by (-s_stock,
    -r_stock, -speed, left), else int64[0, g]): :func:`group_firsts` of those keys, as the tests hold
    them."""
    fits = np.ascontiguousarray(fits, np.bool_)
    rack = np.ascontiguousarray(rack, np.int64)
    site = np.ascontiguousarray(site, np.int64)
    n_racks = int(rack.max()) + 1 if rack.size else 0
    n_sites = int(site.max()) + 1 if site.size else 0
    return _gang_firsts(fits, max(int(g), 1), rack, site, np.ascontiguousarray(speed, np.float64),
                        np.ascontiguousarray(left, np.float64), n_racks, n_sites, bool(pool))


@nb.njit(cache=True)
def _gang_firsts(fits, g, rack, site, speed, left, n_racks, n_sites, pool):  # pragma: no cover - compiled
    n = fits.shape[0]
    ok = np.flatnonzero(fits)
    r_count = np.zeros(n_racks, np.int64)
    s_count = np.zeros(n_sites, np.int64)
    for r in ok:
        r_count[rack[r]] += 1
        s_count[site[r]] += 1
    first = np.zeros((0, g), np.int64)
    if ok.size < g:  # no block of g anywhere: the keys are not needed
        return ok, r_count, s_count, first, first, first
    by_site_keys, by_rack_keys = np.empty((3, n)), np.empty((2, n))
    for i in range(n):
        by_site_keys[0, i] = -r_count[rack[i]]
        by_site_keys[1, i] = by_rack_keys[0, i] = -speed[i]
        by_site_keys[2, i] = by_rack_keys[1, i] = left[i]
    by_site = _group_firsts(ok, site, by_site_keys, g, n_sites)
    by_rack = _group_firsts(ok, rack, by_rack_keys, g, n_racks)
    if pool and (s_count > 0).sum() >= 2:
        keys = np.empty((4, n))
        for i in range(n):
            keys[0, i] = -s_count[site[i]]
            keys[1, i], keys[2, i], keys[3, i] = by_site_keys[0, i], by_site_keys[1, i], by_site_keys[2, i]
        first = _group_firsts(ok, np.zeros(n, np.int64), keys, g, 1)
    return ok, r_count, s_count, by_site, by_rack, first


def group_firsts_reference(rows: np.ndarray, group: np.ndarray, keys: np.ndarray, g: int) -> np.ndarray:
    """The plain form of :func:`group_firsts`: sort every row by group, keys and row, then take the
    first ``g`` of each group that has ``g``."""
    rows = np.asarray(rows, np.int64)
    keys = np.atleast_2d(np.asarray(keys, np.float64))
    if g < 1 or rows.size < g:
        return np.zeros((0, max(g, 0)), np.int64)
    by = rows[np.lexsort((rows, *[k[rows] for k in keys[::-1]], np.asarray(group)[rows]))]
    grp = np.asarray(group)[by]
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    counts = np.diff(np.r_[starts, by.size])
    return by[starts[counts >= g][:, None] + np.arange(g)[None, :]]


def distinct_per_row(codes: np.ndarray) -> np.ndarray:
    """int64[K]: how many distinct codes each row of ``codes`` (int[K, g]) holds (a gang's candidate set:
    its racks), compiled: ``1 + (np.diff(np.sort(codes, axis=1), axis=1) != 0).sum(axis=1)`` without a
    sort per call (the tests hold the two together); 0 for rows of no code."""
    return _distinct_per_row(np.ascontiguousarray(np.atleast_2d(codes), np.int64))


@nb.njit(cache=True)
def _distinct_per_row(codes):  # pragma: no cover - compiled (tested against the sort)
    k, g = codes.shape
    out = np.zeros(k, np.int64)
    for r in range(k):
        for j in range(g):
            new = True
            for i in range(j):
                if codes[r, i] == codes[r, j]:
                    new = False
                    break
            out[r] += new
    return out
