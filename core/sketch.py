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
2 * MAX_KEY + 1 buckets whatever the sample rate.

Window statistics from a sketch (:func:`sketch_stats`) read the buckets as a model of the samples:
the c samples of a bucket spread evenly over its value interval (the first and last interval
tightened to the exact min and max). On these pseudo-samples the exact rules of
``core.windowstats`` apply: Hampel (median, MAD, k * 1.4826 * MAD; a bucket straddling the cut is
split), then mean (exact bucket sums for whole kept buckets), linear-interpolated p50/p95/p99, min
and max (exact when the extreme sample is kept). Measured on lognormal RTT with 3 % spikes: p50, p95,
p99 within 0.25 % of the exact statistics of the Hampel-filtered raw samples (a = 0.005).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from core.vocabulary import MAD_TO_SIGMA
from core.windowstats import DEFAULT_HAMPEL_K, hampel_mask

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
    # 3. dense accumulation over each group's key range
    off = np.zeros(G + 1, dtype=np.int64)
    for g in range(G):
        width = kmax[g] - kmin[g] + 1 if kmax[g] >= kmin[g] else 0
        off[g + 1] = off[g] + width
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


# ------------------------------------------------------------------------------- statistics

STATS_LEN = 10  # count, kept, outliers, lost, mean, p50, p95, p99, min, max


def sketch_stats(
    key: np.ndarray,
    bcount: np.ndarray,
    bsum: np.ndarray,
    count: int,
    lost: int,
    vmin: float,
    vmax: float,
    mapping: Mapping = DEFAULT_MAPPING,
    k: float = DEFAULT_HAMPEL_K,
) -> dict[str, float]:
    """Window statistics (the ``netstate.windows`` fields) from one sketch with sorted keys."""
    out = _sketch_stats(
        np.ascontiguousarray(key, dtype=np.int32), np.ascontiguousarray(bcount, dtype=np.int64),
        np.ascontiguousarray(bsum, dtype=np.float64), count, lost, vmin, vmax,
        mapping.gamma, mapping.min_value, k,
    )
    return stats_dict(out)


def stats_dict(row: np.ndarray) -> dict[str, float]:
    return {
        "count": int(row[0]), "kept": int(row[1]), "outliers": int(row[2]), "lost": int(row[3]),
        "mean": float(row[4]), "p50": float(row[5]), "p95": float(row[6]), "p99": float(row[7]),
        "min": float(row[8]), "max": float(row[9]),
    }


@nb.njit(cache=True)
def _bucket_bounds(key, gamma, min_value, vmin, vmax):
    """Value interval [L, U] of every bucket, tightened by the exact min and max."""
    B = key.shape[0]
    L = np.empty(B)
    U = np.empty(B)
    for b in range(B):
        k = key[b]
        if k == 0:
            L[b] = 0.0
            U[b] = 0.0
            continue
        j = abs(k) - 1
        hi = min_value * gamma**j
        lo = min_value * gamma ** (j - 1) if j > 0 else min_value
        if k > 0:
            L[b] = lo
            U[b] = hi
        else:
            L[b] = -hi
            U[b] = -lo
    if B > 0:
        L[0] = max(L[0], vmin)
        U[0] = max(U[0], L[0])
        U[B - 1] = min(U[B - 1], vmax)
        L[B - 1] = min(L[B - 1], U[B - 1])
        if B == 1:
            U[0] = max(min(U[0], vmax), L[0])
    return L, U


@nb.njit(cache=True, inline="always")
def _index_range(L, U, c, a, b):
    """Indices i in [0, c) whose uniform pseudo-sample L + (i + 0.5)(U - L)/c lies in [a, b]."""
    w = (U - L) / c
    if w == 0.0:
        if a <= L <= b:
            return 0, c - 1
        return 0, -1
    i0 = math.ceil((a - L) / w - 0.5)
    i1 = math.floor((b - L) / w - 0.5)
    if i0 < 0:
        i0 = 0
    if i1 > c - 1:
        i1 = c - 1
    return i0, i1


@nb.njit(cache=True)
def _value_at(L, U, cnt, i0, i1, rank):
    """Pseudo-sample at 0-based ``rank`` among the kept index ranges [i0[b], i1[b]]."""
    cum = 0
    B = L.shape[0]
    last = 0.0
    for b in range(B):
        m = i1[b] - i0[b] + 1
        if m <= 0:
            continue
        if cum + m > rank:
            i = i0[b] + (rank - cum)
            return L[b] + (i + 0.5) * (U[b] - L[b]) / cnt[b]
        cum += m
        last = L[b] + (i1[b] + 0.5) * (U[b] - L[b]) / cnt[b]
    return last


@nb.njit(cache=True)
def _quantile_kept(L, U, cnt, i0, i1, n, q):
    pos = q * (n - 1)
    r = math.floor(pos)
    frac = pos - r
    lo = _value_at(L, U, cnt, i0, i1, r)
    if frac == 0.0:
        return lo
    hi = _value_at(L, U, cnt, i0, i1, r + 1)
    return lo + frac * (hi - lo)


@nb.njit(cache=True)
def _count_within(L, U, cnt, a, b):
    total = 0
    for k in range(L.shape[0]):
        i0, i1 = _index_range(L[k], U[k], cnt[k], a, b)
        if i1 >= i0:
            total += i1 - i0 + 1
    return total


@nb.njit(cache=True)
def _kth_deviation(L, U, cnt, med, k):
    """k-th smallest |x - med| (0-based) over the pseudo-samples.

    The bucket edges' deviations, sorted, bracket the answer between two neighbours (binary search),
    then bisection inside that bracket, which is at most one bucket wide.
    """
    if _count_within(L, U, cnt, med, med) >= k + 1:
        return 0.0
    B = L.shape[0]
    ends = np.empty(2 * B)
    for b in range(B):
        ends[2 * b] = abs(L[b] - med)
        ends[2 * b + 1] = abs(U[b] - med)
    ends.sort()
    lo_i = -1  # count(ends[lo_i]) < k + 1 (index -1 stands for 0.0)
    hi_i = 2 * B - 1  # count(ends[hi_i]) >= k + 1: every sample is within the largest edge
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        if _count_within(L, U, cnt, med - ends[mid], med + ends[mid]) >= k + 1:
            hi_i = mid
        else:
            lo_i = mid
    lo = ends[lo_i] if lo_i >= 0 else 0.0
    hi = ends[hi_i]
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _count_within(L, U, cnt, med - mid, med + mid) >= k + 1:
            hi = mid
        else:
            lo = mid
    return hi


@nb.njit(cache=True)
def _sketch_stats(key, bcount, bsum, count, lost, vmin, vmax, gamma, min_value, k_hampel):
    out = np.full(STATS_LEN, np.nan)
    out[0] = count
    out[3] = lost
    out[1] = 0
    out[2] = 0
    B = key.shape[0]
    n = 0
    for b in range(B):
        n += bcount[b]
    if n == 0:
        return out
    L, U = _bucket_bounds(key, gamma, min_value, vmin, vmax)
    all0 = np.zeros(B, dtype=np.int64)
    all1 = bcount - 1
    med = _quantile_kept(L, U, bcount, all0, all1, n, 0.5)
    if n % 2 == 1:
        mad = _kth_deviation(L, U, bcount, med, (n - 1) // 2)
    else:
        mad = 0.5 * (_kth_deviation(L, U, bcount, med, n // 2 - 1)
                     + _kth_deviation(L, U, bcount, med, n // 2))
    i0 = all0.copy()
    i1 = all1.copy()
    if mad > 0:
        thr = k_hampel * MAD_TO_SIGMA * mad
        for b in range(B):
            i0[b], i1[b] = _index_range(L[b], U[b], bcount[b], med - thr, med + thr)
    kept = 0
    s = 0.0
    first = -1
    last = -1
    for b in range(B):
        m = i1[b] - i0[b] + 1
        if m <= 0:
            continue
        if first < 0:
            first = b
        last = b
        kept += m
        if m == bcount[b]:
            s += bsum[b]
        else:
            w = (U[b] - L[b]) / bcount[b]
            s += m * (L[b] + w * (0.5 * (i0[b] + i1[b]) + 0.5))
    out[1] = kept
    out[2] = n - kept
    if kept == 0:
        return out
    out[4] = s / kept
    out[5] = _quantile_kept(L, U, bcount, i0, i1, kept, 0.50)
    out[6] = _quantile_kept(L, U, bcount, i0, i1, kept, 0.95)
    out[7] = _quantile_kept(L, U, bcount, i0, i1, kept, 0.99)
    wf = (U[first] - L[first]) / bcount[first]
    wl = (U[last] - L[last]) / bcount[last]
    out[8] = vmin if (first == 0 and i0[0] == 0) else L[first] + (i0[first] + 0.5) * wf
    out[9] = vmax if (last == B - 1 and i1[last] == bcount[last] - 1) else L[last] + (i1[last] + 0.5) * wl
    for f in range(5, 8):
        out[f] = min(max(out[f], out[8]), out[9])
    return out


def sketch_stats_reference(
    key, bcount, bsum, count, lost, vmin, vmax, mapping: Mapping = DEFAULT_MAPPING, k: float = DEFAULT_HAMPEL_K
) -> dict[str, float]:
    """Plain numpy version of :func:`sketch_stats`: expand every bucket into ``count`` pseudo-samples
    spread evenly over its value interval, then apply the exact rules of ``window_stats_reference``
    (means of whole kept buckets use their exact sums)."""
    key = np.asarray(key, dtype=np.int64)
    bcount = np.asarray(bcount, dtype=np.int64)
    bsum = np.asarray(bsum, dtype=np.float64)
    n = int(bcount.sum())
    nan = float("nan")
    res = {"count": int(count), "kept": 0, "outliers": 0, "lost": int(lost), "mean": nan,
           "p50": nan, "p95": nan, "p99": nan, "min": nan, "max": nan}
    if n == 0:
        return res
    j = np.abs(key) - 1.0
    hi = mapping.min_value * mapping.gamma**j
    lo = np.where(j > 0, mapping.min_value * mapping.gamma ** (j - 1), mapping.min_value)
    L = np.where(key > 0, lo, np.where(key < 0, -hi, 0.0))
    U = np.where(key > 0, hi, np.where(key < 0, -lo, 0.0))
    L[0] = max(L[0], vmin)
    U[0] = max(U[0], L[0])
    U[-1] = min(U[-1], vmax)
    L[-1] = min(L[-1], U[-1])
    if key.size == 1:
        U[0] = max(min(U[0], vmax), L[0])
    bucket = np.repeat(np.arange(key.size), bcount)
    idx = np.arange(n) - np.repeat(np.cumsum(bcount) - bcount, bcount)
    x = L[bucket] + (idx + 0.5) * (U - L)[bucket] / bcount[bucket]
    keep = hampel_mask(x, k)
    kept = int(keep.sum())
    res.update(kept=kept, outliers=n - kept)
    if kept == 0:
        return res
    whole = np.bincount(bucket[keep], minlength=key.size) == bcount
    total = bsum[whole].sum() + x[keep & ~whole[bucket]].sum()
    xs = x[keep]
    first_exact = keep[0]
    last_exact = keep[-1]
    vlo = vmin if first_exact else xs.min()
    vhi = vmax if last_exact else xs.max()
    p50, p95, p99 = np.clip(np.percentile(xs, [50, 95, 99]), vlo, vhi)
    res.update(mean=float(total / kept), p50=float(p50), p95=float(p95), p99=float(p99),
               min=float(vlo), max=float(vhi))
    return res


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
    dcount = np.zeros(off[G], dtype=np.int64)
    dsum = np.zeros(off[G], dtype=np.float64)
    for i in range(gid.shape[0]):
        g = gid[i]
        cell = off[g] + key[i] - kmin[g]
        dcount[cell] += bcount[i]
        dsum[cell] += bsum[i]
    start, okey, obc, obs = _compact(G, off, kmin, dcount, dsum)
    return ocount, olost, omin, omax, start, okey, obc, obs


def stats_many(s: SketchSet, mapping: Mapping = DEFAULT_MAPPING, k: float = DEFAULT_HAMPEL_K) -> np.ndarray:
    """Window statistics of every sketch of a set: float64[G, 10] in STAT_FIELDS order."""
    return _stats_many(s.count, s.lost, s.vmin, s.vmax, s.start, s.key, s.bcount, s.bsum,
                       mapping.gamma, mapping.min_value, k)


@nb.njit(cache=True)
def _stats_many(count, lost, vmin, vmax, start, key, bcount, bsum, gamma, min_value, k_hampel):
    G = count.shape[0]
    out = np.empty((G, STATS_LEN))
    for g in range(G):
        a = start[g]
        b = start[g + 1]
        out[g] = _sketch_stats(key[a:b], bcount[a:b], bsum[a:b], count[g], lost[g], vmin[g],
                               vmax[g], gamma, min_value, k_hampel)
    return out
