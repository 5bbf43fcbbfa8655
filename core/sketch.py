"""Log-bucket sketches of window samples: bounded memory whatever the sample rate, mergeable.

Mapping (DDSketch-style, relative accuracy ``a``): with gamma = (1 + a) / (1 - a), a value x with
|x| >= ``min_value`` falls in bucket j = ceil(log_gamma(|x| / min_value)) >= 0 and gets the signed
key sign(x) * (j + 1); |x| < min_value gets key 0. Keys are monotonic in x, so sorted keys are
sorted values. The bucket's representative value 2 * gamma^j / (gamma + 1) * min_value is within
``a`` relative error of every value in the bucket; every quantile read from the sketch is therefore
within ``a`` of a true sample quantile (up to the interpolation between neighbouring ranks).

Each bucket keeps its count and the exact sum of its values, so the mean of any set of buckets is
exact. Besides the buckets a sketch keeps count (lost included), lost, min and max. Sketches with the
same mapping merge exactly: counts and sums add.

Cost: a bucket is 2 + 8 + 8 bytes in the wire format (key int16, count int64, sum float64). Keys lie
in [-MAX_KEY, MAX_KEY]; with a = 0.005 and min_value = 1e-6 one unit of key spans 1 %, and a series
whose samples span four decades (e.g. 0.1 ms to 1 s) uses at most ~925 buckets (~17 kB); typical RTT
windows (lognormal body plus spikes) use 100-400. Memory per (series, window) is bounded by
2 * MAX_KEY + 1 buckets whatever the sample rate (and by ~8,300 for the values validation lets in:
|x| <= 1e12). The kernels accumulate over each group's key range densely when the ranges are
compact and sort (group, key) when they are not, so a batch of far-apart values costs memory in
proportion to its rows, never to the key span.

Statistics of a sketch (quantiles, Hampel outlier removal): core/sketch_stats.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

DEFAULT_RELATIVE_ACCURACY = 0.005
DEFAULT_MIN_VALUE = 1e-6
MAX_KEY = 32_000  # |key| fits int16


@dataclass(frozen=True)
class Mapping:
    relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY
    min_value: float = DEFAULT_MIN_VALUE

    def __post_init__(self) -> None:
        if not (0 < self.relative_accuracy < 1):
            raise ValueError("relative_accuracy must be in (0, 1)")
        if not (self.min_value > 0):
            raise ValueError("min_value must be > 0")

    @property
    def gamma(self) -> float:
        return (1 + self.relative_accuracy) / (1 - self.relative_accuracy)

    @property
    def inv_log_gamma(self) -> float:
        return 1.0 / math.log(self.gamma)


DEFAULT_MAPPING = Mapping()


# ------------------------------------------------------------------------------ value <-> key


@nb.njit(cache=True, inline="always")
def _key_of(x: float, inv_log_gamma: float, min_value: float) -> int:
    ax = abs(x)
    if ax < min_value:
        return 0
    j = math.ceil(math.log(ax / min_value) * inv_log_gamma)  # >= 0 since ax >= min_value
    k = j + 1
    if k > MAX_KEY:
        k = MAX_KEY
    return k if x > 0 else -k


def keys_reference(values: np.ndarray, mapping: Mapping) -> np.ndarray:
    """numpy reference of the value -> key mapping (values hold no NaN)."""
    ax = np.abs(values)
    with np.errstate(divide="ignore"):
        j = np.ceil(np.log(np.maximum(ax, mapping.min_value) / mapping.min_value) * mapping.inv_log_gamma)
    k = np.minimum(j + 1, MAX_KEY).astype(np.int64)
    k[ax < mapping.min_value] = 0
    return np.where(values > 0, k, -k)


# ---------------------------------------------------------------------- the per-message kernel


@dataclass
class GroupedSketches:
    """Sketches of the groups of one batch, in CSR form.

    ``code[g]`` names group g (the caller's series x window code); its buckets are
    ``key/count/sum[start[g]:start[g+1]]``, sorted by key.
    """

    code: np.ndarray  # int64[G]
    count: np.ndarray  # int64[G], lost included
    lost: np.ndarray  # int64[G]
    vmin: np.ndarray  # float64[G], +inf when nothing but lost samples
    vmax: np.ndarray  # float64[G], -inf likewise
    start: np.ndarray  # int64[G + 1]
    key: np.ndarray  # int32[B]
    bcount: np.ndarray  # int64[B]
    bsum: np.ndarray  # float64[B]

    def __len__(self) -> int:
        return int(self.code.shape[0])


def sketch_groups(codes: np.ndarray, values: np.ndarray, mapping: Mapping = DEFAULT_MAPPING) -> GroupedSketches:
    """Sketch every group of a batch in one kernel call. ``codes``: int64 >= 0 per row (the group);
    ``values``: float64 per row, NaN = lost. Groups come out in order of first appearance."""
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if codes.shape != values.shape:
        raise ValueError("codes and values must have the same length")
    if codes.size and codes.min() < 0:
        raise ValueError("group codes must be >= 0")
    return GroupedSketches(*_sketch_groups(codes, values, mapping.inv_log_gamma, mapping.min_value))


@nb.njit(cache=True)
def _compact(G, off, kmin, dcount, dsum):
    """CSR buckets from dense per-group cells: group g owns cells off[g]..off[g+1]-1, key kmin[g]+i."""
    B = 0
    for c in range(off[G]):
        if dcount[c] > 0:
            B += 1
    start = np.zeros(G + 1, dtype=np.int64)
    bkey = np.empty(B, dtype=np.int32)
    bcount = np.empty(B, dtype=np.int64)
    bsum = np.empty(B, dtype=np.float64)
    b = 0
    for g in range(G):
        for c in range(off[g], off[g + 1]):
            if dcount[c] > 0:
                bkey[b] = kmin[g] + (c - off[g])
                bcount[b] = dcount[c]
                bsum[b] = dsum[c]
                b += 1
        start[g + 1] = b
    return start, bkey, bcount, bsum


_DENSE_SLACK = 65_536  # dense cells allowed beyond 4 per row; above: sort instead (memory O(rows))


@nb.njit(cache=True)
def _sparse_buckets(G, gid, key, weight, total, keep):
    """CSR buckets by a stable sort on (group, key): memory O(rows) whatever the key range; sums
    are added in row order within each bucket, as the dense path adds them."""
    n = gid.shape[0]
    m = 0
    for i in range(n):
        if keep[i]:
            m += 1
    comb = np.empty(m, dtype=np.int64)
    idx = np.empty(m, dtype=np.int64)
    j = 0
    width = 2 * MAX_KEY + 1
    for i in range(n):
        if keep[i]:
            comb[j] = gid[i] * width + (key[i] + MAX_KEY)
            idx[j] = i
            j += 1
    order = np.argsort(comb, kind="mergesort")
    B = 0
    prev = -1
    for t in range(m):
        if comb[order[t]] != prev:
            B += 1
            prev = comb[order[t]]
    per_group = np.zeros(G + 1, dtype=np.int64)
    bkey = np.empty(B, dtype=np.int32)
    bcount = np.zeros(B, dtype=np.int64)
    bsum = np.zeros(B, dtype=np.float64)
    b = -1
    prev = -1
    for t in range(m):
        i = idx[order[t]]
        if comb[order[t]] != prev:
            b += 1
            prev = comb[order[t]]
            bkey[b] = key[i]
            per_group[gid[i] + 1] += 1
        bcount[b] += weight[i]
        bsum[b] += total[i]
    start = np.cumsum(per_group)
    return start, bkey, bcount, bsum


@nb.njit(cache=True)
def _sketch_groups(codes, values, inv_log_gamma, min_value):
    n = codes.shape[0]
    gid = np.empty(n, dtype=np.int64)
    gcode = np.empty(n, dtype=np.int64)
    G = 0
    # 1. dense group ids, in first-appearance order: a direct table when the codes are compact
    #    (the usual case: series x pane codes of one message), open addressing otherwise
    cmax = -1
    for i in range(n):
        if codes[i] > cmax:
            cmax = codes[i]
    if cmax < 4 * n + 4096:
        table = np.full(cmax + 1, -1, dtype=np.int64)
        for i in range(n):
            c = codes[i]
            g = table[c]
            if g < 0:
                g = G
                table[c] = g
                gcode[g] = c
                G += 1
            gid[i] = g
    else:
        cap = 16
        while cap < 2 * n:
            cap *= 2
        slot_code = np.full(cap, -1, dtype=np.int64)
        slot_gid = np.empty(cap, dtype=np.int64)
        mask = cap - 1
        for i in range(n):
            c = codes[i]
            h = (c * np.int64(-7046029254386353131)) & mask  # multiplicative hash
            while True:
                sc = slot_code[h]
                if sc == c:
                    gid[i] = slot_gid[h]
                    break
                if sc == -1:
                    slot_code[h] = c
                    slot_gid[h] = G
                    gid[i] = G
                    gcode[G] = c
                    G += 1
                    break
                h = (h + 1) & mask
    # 2. keys, per-group scalars and key ranges
    key = np.zeros(n, dtype=np.int32)
    count = np.zeros(G, dtype=np.int64)
    lost = np.zeros(G, dtype=np.int64)
    vmin = np.full(G, np.inf)
    vmax = np.full(G, -np.inf)
    kmin = np.full(G, 2**31 - 1, dtype=np.int64)
    kmax = np.full(G, -(2**31), dtype=np.int64)
    for i in range(n):
        g = gid[i]
        count[g] += 1
        x = values[i]
        if x != x:  # NaN: a lost probe
            lost[g] += 1
            continue
        k = _key_of(x, inv_log_gamma, min_value)
        key[i] = k
        if x < vmin[g]:
            vmin[g] = x
        if x > vmax[g]:
            vmax[g] = x
        if k < kmin[g]:
            kmin[g] = k
        if k > kmax[g]:
            kmax[g] = k
    # 3. dense accumulation over each group's key range (sorting when the ranges are sparse)
    off = np.zeros(G + 1, dtype=np.int64)
    for g in range(G):
        width = kmax[g] - kmin[g] + 1 if kmax[g] >= kmin[g] else 0
        off[g + 1] = off[g] + width
    if off[G] > 4 * n + _DENSE_SLACK:
        start, bkey, bcount, bsum = _sparse_buckets(
            G, gid, key, np.ones(n, dtype=np.int64), values, values == values)
        return gcode[:G].copy(), count, lost, vmin, vmax, start, bkey, bcount, bsum
    dcount = np.zeros(off[G], dtype=np.int64)
    dsum = np.zeros(off[G], dtype=np.float64)
    for i in range(n):
        x = values[i]
        if x != x:
            continue
        g = gid[i]
        cell = off[g] + key[i] - kmin[g]
        dcount[cell] += 1
        dsum[cell] += x
    # 4. compact the non-empty cells, group by group
    start, bkey, bcount, bsum = _compact(G, off, kmin, dcount, dsum)
    return gcode[:G].copy(), count, lost, vmin, vmax, start, bkey, bcount, bsum


def sketch_groups_reference(codes: np.ndarray, values: np.ndarray, mapping: Mapping = DEFAULT_MAPPING) -> GroupedSketches:
    """Plain numpy version of :func:`sketch_groups`, for tests."""
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    uniq, first = np.unique(codes, return_index=True)
    order = np.argsort(first)
    gcodes = uniq[order]
    cols = {f: [] for f in ("count", "lost", "vmin", "vmax")}
    start, keys, bcounts, bsums = [0], [], [], []
    for c in gcodes:
        v = values[codes == c]
        x = v[~np.isnan(v)]
        cols["count"].append(v.size)
        cols["lost"].append(v.size - x.size)
        cols["vmin"].append(x.min() if x.size else np.inf)
        cols["vmax"].append(x.max() if x.size else -np.inf)
        k = keys_reference(x, mapping)
        uk = np.unique(k)
        keys += uk.tolist()
        bcounts += [int((k == u).sum()) for u in uk]
        bsums += [float(x[k == u].sum()) for u in uk]
        start.append(len(keys))
    return GroupedSketches(
        gcodes, np.array(cols["count"], dtype=np.int64), np.array(cols["lost"], dtype=np.int64),
        np.array(cols["vmin"], dtype=np.float64), np.array(cols["vmax"], dtype=np.float64),
        np.array(start, dtype=np.int64), np.array(keys, dtype=np.int32),
        np.array(bcounts, dtype=np.int64), np.array(bsums, dtype=np.float64),
    )


# ----------------------------------------------------------------------- many sketches at once


@dataclass
class SketchSet:
    """Many sketches in CSR form: sketch g has buckets ``key/bcount/bsum[start[g]:start[g+1]]``
    (sorted by key) and scalars ``count[g]``, ``lost[g]``, ``vmin[g]``, ``vmax[g]``."""

    count: np.ndarray
    lost: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    start: np.ndarray
    key: np.ndarray
    bcount: np.ndarray
    bsum: np.ndarray

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def buckets(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = self.start[g], self.start[g + 1]
        return self.key[a:b], self.bcount[a:b], self.bsum[a:b]


def merge_sets(n_groups: int, gid: np.ndarray, key: np.ndarray, bcount: np.ndarray, bsum: np.ndarray,
               sgid: np.ndarray, count: np.ndarray, lost: np.ndarray, vmin: np.ndarray,
               vmax: np.ndarray) -> SketchSet:
    """Merge parts into ``n_groups`` sketches in one call.

    Bucket rows (``key``, ``bcount``, ``bsum``) belong to group ``gid``; scalar rows (``count``,
    ``lost``, ``vmin``, ``vmax``) to group ``sgid``. Counts and sums add, min/max combine.
    """
    out = _merge_sets(
        n_groups,
        np.ascontiguousarray(gid, dtype=np.int64), np.ascontiguousarray(key, dtype=np.int32),
        np.ascontiguousarray(bcount, dtype=np.int64), np.ascontiguousarray(bsum, dtype=np.float64),
        np.ascontiguousarray(sgid, dtype=np.int64), np.ascontiguousarray(count, dtype=np.int64),
        np.ascontiguousarray(lost, dtype=np.int64), np.ascontiguousarray(vmin, dtype=np.float64),
        np.ascontiguousarray(vmax, dtype=np.float64),
    )
    return SketchSet(*out)


@nb.njit(cache=True)
def _merge_sets(G, gid, key, bcount, bsum, sgid, count, lost, vmin, vmax):
    ocount = np.zeros(G, dtype=np.int64)
    olost = np.zeros(G, dtype=np.int64)
    omin = np.full(G, np.inf)
    omax = np.full(G, -np.inf)
    for i in range(sgid.shape[0]):
        g = sgid[i]
        ocount[g] += count[i]
        olost[g] += lost[i]
        if vmin[i] < omin[g]:
            omin[g] = vmin[i]
        if vmax[i] > omax[g]:
            omax[g] = vmax[i]
    kmin = np.full(G, 2**31 - 1, dtype=np.int64)
    kmax = np.full(G, -(2**31), dtype=np.int64)
    for i in range(gid.shape[0]):
        g = gid[i]
        if key[i] < kmin[g]:
            kmin[g] = key[i]
        if key[i] > kmax[g]:
            kmax[g] = key[i]
    off = np.zeros(G + 1, dtype=np.int64)
    for g in range(G):
        off[g + 1] = off[g] + (kmax[g] - kmin[g] + 1 if kmax[g] >= kmin[g] else 0)
    if off[G] > 4 * gid.shape[0] + _DENSE_SLACK:
        start, okey, obc, obs = _sparse_buckets(
            G, gid, key, bcount, bsum, np.ones(gid.shape[0], dtype=np.bool_))
        return ocount, olost, omin, omax, start, okey, obc, obs
    dcount = np.zeros(off[G], dtype=np.int64)
    dsum = np.zeros(off[G], dtype=np.float64)
    for i in range(gid.shape[0]):
        g = gid[i]
        cell = off[g] + key[i] - kmin[g]
        dcount[cell] += bcount[i]
        dsum[cell] += bsum[i]
    start, okey, obc, obs = _compact(G, off, kmin, dcount, dsum)
    return ocount, olost, omin, omax, start, okey, obc, obs
