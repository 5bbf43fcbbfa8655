"""A gang's candidate sets judged by their member pairs, compiled: per set the worst pair RTT and the
narrowest pair bandwidth (at most one TCP window per round trip: core.quality.window_gbps), an
unmeasured pair at the worst measured pair of the block (one rack's RTT when none is), and whether every
pair is measured. One pass over the sets' pairs instead of a dozen array operations per gang
(streams/worker/scheduling/gang_sets.sets_paths); :func:`sets_worst_narrow_reference` writes out the
array form it replaces and the tests hold the two together, bit for bit."""

from __future__ import annotations

import numba as nb
import numpy as np

from core.ect import members_paths
from core.quality import HEADROOM_FLOOR, TCP_WINDOW_BYTES, window_gbps


def sets_worst_narrow(rtt_ms: np.ndarray, gbps: np.ndarray, ideal_rtt_ms: float) -> tuple:
    """(worst pair RTT ms, narrowest pair Gbit/s, every pair measured), float64[K], float64[K],
    bool[K], of K sets of g ≥ 2 members: ``rtt_ms[k, i, j]`` from member i to member j as measured
    (NaN or inf: not), ``gbps[k, i, j]`` the usable bandwidth between them (NaN spreads, as numpy's
    minimum does); a member to itself is not a pair."""
    rtt = np.ascontiguousarray(rtt_ms, np.float64)
    return _sets_worst_narrow(rtt, np.ascontiguousarray(gbps, np.float64), float(ideal_rtt_ms),
                              float(TCP_WINDOW_BYTES * 8))


@nb.njit(cache=True)
def _sets_worst_narrow(rtt, gbps, ideal, window_bits):  # pragma: no cover - compiled (tested against the reference)
    k_sets, g = rtt.shape[0], rtt.shape[1]
    unknown, seen = -np.inf, False
    for k in range(k_sets):
        for i in range(g):
            for j in range(g):
                v = rtt[k, i, j]
                if i != j and np.isfinite(v):
                    unknown = max(unknown, v)
                    seen = True
    if not seen:
        unknown = ideal
    worst, narrow = np.empty(k_sets), np.empty(k_sets)
    measured = np.ones(k_sets, np.bool_)
    for k in range(k_sets):
        w, n, first = 0.0, 0.0, True
        for i in range(g):
            for j in range(g):
                if i == j:
                    continue
                v = rtt[k, i, j]
                if not np.isfinite(v):
                    measured[k] = False
                    v = unknown
                cap = window_bits / (v / 1000.0) / 1e9 if v > 0 else np.inf
                if not np.isfinite(cap):
                    cap = np.inf
                b = gbps[k, i, j]
                b = b if np.isnan(b) or b < cap else cap  # numpy's minimum: NaN spreads
                if first:
                    w, n, first = v, b, False
                else:
                    w = v if v > w else w
                    n = n if np.isnan(n) or n <= b else b
        worst[k], narrow[k] = w, n
    return worst, narrow, measured


def sets_worst_narrow_reference(rtt_ms: np.ndarray, gbps: np.ndarray, ideal_rtt_ms: float) -> tuple:
    """The array form :func:`sets_worst_narrow` replaces, step for step."""
    rtt = np.asarray(rtt_ms, np.float64)
    g = rtt.shape[-1]
    off = ~np.eye(g, dtype=bool)
    known = rtt[:, off][np.isfinite(rtt[:, off])]
    unknown = float(known.max()) if known.size else ideal_rtt_ms
    r = np.where(np.isfinite(rtt), rtt, unknown)
    worst, narrow = members_paths(r, np.minimum(np.asarray(gbps, np.float64), window_gbps(r)), unknown)
    return worst, narrow, np.isfinite(rtt[:, off]).all(axis=1)


def rack_pairs(sets: np.ndarray, src: np.ndarray, towards: np.ndarray, node_rack: np.ndarray, p95: np.ndarray,
               loss: np.ndarray | None, lost: float, link_gbps: np.ndarray, headroom: np.ndarray,
               booked_keys: np.ndarray | None, booked_gbps: np.ndarray, n_codes: int) -> tuple:
    """(RTT ms, usable Gbit/s), float64[K, g, g] each, from member i to member j of each of K sets
    (``sets`` int64[K, g] node rows) whose paths are all read at rack level: from member i's source
    (``src[i]``, a row of ``towards``: int64[S, R] a path row per rack, -1 none) to member j's rack
    (``node_rack[j]``), ``p95`` of that path; NaN where a source, rack or path is missing. Usable: the
    slower link (``link_gbps``) times the receiver's NIC ``headroom`` (at least HEADROOM_FLOOR), in
    float32 as node inputs are; less what is booked between the two racks (``booked_keys``: sorted
    ``rack_a x n_codes + rack_b``, ``booked_gbps`` their rates; None: nothing booked) down to
    HEADROOM_FLOOR of it; 0 where either direction lost (``loss`` at least ``lost``; None: no path
    did). One compiled pass for what streams/worker/scheduling/gang_sets.sets_paths' array form
    gathers in a dozen steps; the tests hold the two together, bit for bit."""
    return _rack_pairs(np.ascontiguousarray(sets, np.int64), src, towards, node_rack, p95,
                       np.zeros(0) if loss is None else loss, loss is not None, float(lost), link_gbps, headroom,
                       np.zeros(0, np.int64) if booked_keys is None else booked_keys, booked_gbps,
                       booked_keys is not None, int(n_codes), float(HEADROOM_FLOOR))


@nb.njit(cache=True, inline="always")
def _at(src, towards, node_rack, col, a, b):  # pragma: no cover - compiled
    """The rack-level path value from node ``a`` to node ``b`` (NaN: none)."""
    s, r = src[a], node_rack[b]
    if s < 0 or r < 0 or towards.shape[0] == 0:
        return np.nan
    row = towards[s, r]
    return col[row] if row >= 0 else np.nan


@nb.njit(cache=True, inline="always")
def _np_max(a, b):  # pragma: no cover - compiled
    """numpy's maximum of two floats: NaN wins."""
    return a if a >= b or np.isnan(a) else b


@nb.njit(cache=True)
def _rack_pairs(sets, src, towards, node_rack, p95, loss, with_loss, lost, link, headroom, keys, vals, booked,
                n_codes, floor):  # pragma: no cover - compiled (tested against gang_sets' array form)
    k_sets, g = sets.shape
    rtt, gbps = np.empty((k_sets, g, g)), np.empty((k_sets, g, g))
    for k in range(k_sets):
        for i in range(g):
            a = sets[k, i]
            for j in range(g):
                b = sets[k, j]
                rtt[k, i, j] = _at(src, towards, node_rack, p95, a, b)
                slower = link[a] if link[a] <= link[b] or np.isnan(link[a]) else link[b]
                v = np.float64(np.float32(np.float64(slower) * _np_max(headroom[b], floor)))
                if booked:
                    ra, rb = node_rack[a], node_rack[b]
                    got = 0.0
                    if ra >= 0 and rb >= 0 and keys.size:
                        key = ra * n_codes + rb
                        at = min(np.searchsorted(keys, key), keys.size - 1)
                        if keys[at] == key:
                            got = vals[at]
                    v = _np_max(v - got, floor * v)
                if with_loss and (_at(src, towards, node_rack, loss, a, b) >= lost
                                  or _at(src, towards, node_rack, loss, b, a) >= lost):
                    v = 0.0
                gbps[k, i, j] = v
    return rtt, gbps
