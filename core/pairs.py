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
from core.quality import TCP_WINDOW_BYTES, window_gbps


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
