"""What probes would have reported: window results drawn around a ground truth (for the replay).

For each path, a window of ``probes`` active probes: each is lost with the path's true loss rate;
the others measure ``rtt x lognormal(0, jitter)`` and a share ``spike_share`` of them is an outlier
(``spike_factor`` times slower: queueing, a reroute's first packets). The window's statistics are
those the worker reports: Hampel outlier removal (|x - median| > k x 1.4826 x MAD), then mean and
p50/p95/p99 of what is kept, ``count`` (lost included), ``lost``. The scheduler of the replay sees
only these, never the truth. Vectorised over paths; seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from core.vocabulary import MAD_TO_SIGMA


@dataclass(frozen=True)
class ProbeModel:
    probes: int = 100
    jitter: float = 0.05  # sigma of the lognormal around the true RTT
    spike_share: float = 0.02
    spike_factor: float = 10.0
    hampel_k: float = 3.0

    def __post_init__(self) -> None:
        if self.probes < 1 or self.jitter < 0 or not 0 <= self.spike_share <= 1 or self.spike_factor < 1:
            raise ValueError("probes >= 1, jitter >= 0, 0 <= spike_share <= 1, spike_factor >= 1")


def draw_probes(rtt_ms: np.ndarray, loss: np.ndarray, model: ProbeModel, rng: np.random.Generator,
                jitter: np.ndarray | None = None) -> np.ndarray:
    """float64[P, probes]: RTT samples of one window per path, NaN for a lost probe. ``jitter``:
    float[P] each path's own lognormal sigma (a measured spread), instead of the model's. The draws
    are numpy's (``rng.lognormal(0, sigma)``'s normals, then the spikes' and the losses' uniforms),
    combined in one compiled pass: the same samples, bit for bit (see the tests)."""
    rtt = np.ascontiguousarray(rtt_ms, np.float64)
    return _samples(rtt, loss, model, probe_draws(rtt.shape[0], model, rng), jitter)


def probe_draws(paths: int, model: ProbeModel, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(normals, spike uniforms, loss uniforms), each float64[paths, probes]: the random part of a
    window of every path, in :func:`draw_probes`' order; what is drawn does not depend on the truth."""
    shape = (paths, model.probes)
    return rng.standard_normal(shape), rng.random(shape), rng.random(shape)


def _samples(rtt: np.ndarray, loss, model: ProbeModel, draws: tuple[np.ndarray, ...],
             jitter: np.ndarray | None) -> np.ndarray:
    z, spike, lost = draws
    sigma = np.broadcast_to(np.asarray(model.jitter if jitter is None else jitter, np.float64), rtt.shape)
    return _probe_samples(rtt, np.ascontiguousarray(sigma), z, spike, lost,
                          np.ascontiguousarray(np.broadcast_to(np.asarray(loss, np.float64), rtt.shape)),
                          model.spike_share, model.spike_factor)


@nb.njit(cache=True, nogil=True)
def _probe_samples(rtt, sigma, z, spike, lost, loss, share, factor):  # pragma: no cover - compiled
    """rtt x exp(0 + sigma x z) (numpy's lognormal: libm's exp), x ``factor`` where a spike, NaN where lost."""
    out = np.empty(z.shape)
    for p in range(z.shape[0]):
        for k in range(z.shape[1]):
            x = rtt[p] * math.exp(0.0 + sigma[p] * z[p, k])
            if spike[p, k] < share:
                x = x * factor
            out[p, k] = np.nan if lost[p, k] < loss[p] else x
    return out


def window_results(samples: np.ndarray, hampel_k: float = 3.0) -> dict[str, np.ndarray]:
    """The worker's window statistics of each row of ``samples`` (NaN = lost), one numba pass per row
    (the same values, bit for bit, as Hampel over numpy's nanquantile and nanmean: see the tests)."""
    x = np.ascontiguousarray(samples, np.float64)
    if x.ndim != 2:
        raise ValueError("samples: float[rows, probes]")
    count = np.full(x.shape[0], x.shape[1], np.int64)
    lost = np.isnan(x).sum(axis=1)
    mean, q, n_kept = _hampel_rows(x, np.sort(x, axis=1), hampel_k * MAD_TO_SIGMA)
    return {"count": count, "lost": lost, "kept": n_kept, "outliers": count - lost - n_kept, "mean": mean,
            "p50": q[0], "p95": q[1], "p99": q[2], "loss": np.where(count > 0, lost / np.maximum(count, 1), np.nan)}


@nb.njit(cache=True)
def _quantile_sorted(s, n, q):
    """numpy's linear quantile of the first ``n`` values of sorted ``s`` (NaN when n is 0)."""
    if n == 0:
        return np.nan
    pos = q * (n - 1)
    lo = int(np.floor(pos))
    hi = min(lo + 1, n - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


@nb.njit(cache=True)
def _block_sum(a, lo, n):
    """numpy's pairwise summation of ``a[lo:lo + n]`` for n <= 128: eight running sums, then a tree."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r = np.empty(8)
    for j in range(8):
        r[j] = a[lo + j]
    i = 8
    while i < n - (n % 8):
        for j in range(8):
            r[j] += a[lo + i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@nb.njit(cache=True)
def _pairwise_sum(a, n):
    """numpy's pairwise summation of ``a[:n]`` (what np.sum does along a contiguous row): above 128
    values, the sum of the halves (the first a multiple of 8). Without recursion: numba's cache
    cannot load a recursive function (it crashes), so the halves are walked with a stack."""
    lo, size, stage, left = np.zeros(64, np.int64), np.zeros(64, np.int64), np.zeros(64, np.int64), np.zeros(64)
    size[0] = n
    sp = 0
    while True:
        if size[sp] > 128 and stage[sp] == 0:  # split: the left half first
            stage[sp] = 1
            half = size[sp] // 2
            half -= half % 8
            lo[sp + 1], size[sp + 1], stage[sp + 1] = lo[sp], half, 0
            sp += 1
            continue
        val = _block_sum(a, lo[sp], size[sp])
        sp -= 1
        while sp >= 0 and stage[sp] == 2:  # a right half done: its parent's sum is done too
            val = left[sp] + val
            sp -= 1
        if sp < 0:
            return val
        left[sp], stage[sp] = val, 2  # a left half done: the right half next
        half = size[sp] // 2
        half -= half % 8
        lo[sp + 1], size[sp + 1], stage[sp + 1] = lo[sp] + half, size[sp] - half, 0
        sp += 1


@nb.njit(cache=True)
def _hampel_range(v, width, dev, limit):
    """Hampel's kept run of one sorted row ``v`` (NaN last; |x - median| > ``limit`` x MAD removed,
    MAD 0 removes nothing): (n, lo, hi, med, thr, mad), n the values that are not NaN and v[lo:hi] what
    is kept. The NaNs and the median's place by bisection; the deviations from the median come sorted
    by merging both sides of it, up to the MAD's rank (half the row)."""
    lo, hi = 0, width  # n: the first NaN (NaN sort last)
    while lo < hi:
        mid = (lo + hi) // 2
        if np.isnan(v[mid]):
            hi = mid
        else:
            lo = mid + 1
    n = lo
    if n == 0:
        return 0, 0, 0, np.nan, np.nan, np.nan
    med = _quantile_sorted(v, n, 0.5)
    lo, hi = 0, n  # split: v[:split] below the median, v[split:n] at or above it
    while lo < hi:
        mid = (lo + hi) // 2
        if v[mid] - med < 0:
            lo = mid + 1
        else:
            hi = mid
    split = lo
    i, j = split - 1, split
    for k in range(min(n, n // 2 + 2)):  # merge |v - med| of both sides (each in order) up to the MAD's rank
        if j >= n or (i >= 0 and abs(v[i] - med) <= abs(v[j] - med)):
            dev[k] = abs(v[i] - med)
            i -= 1
        else:
            dev[k] = abs(v[j] - med)
            j += 1
    mad = _quantile_sorted(dev, n, 0.5)
    thr = limit * mad
    lo, hi = 0, n
    if mad != 0:
        while lo < n and not abs(v[lo] - med) <= thr:
            lo += 1
        while hi > lo and not abs(v[hi - 1] - med) <= thr:
            hi -= 1
    return n, lo, hi, med, thr, mad


@nb.njit(cache=True)
def _hampel_rows(x, s, limit):
    """Per row of ``x`` (``s``: each row sorted, NaN last): Hampel filter (_hampel_range), then the
    mean and p50/p95/p99 of what is kept, and how many were kept."""
    rows, width = x.shape
    mean = np.full(rows, np.nan)
    q = np.full((3, rows), np.nan)
    kept = np.zeros(rows, np.int64)
    dev = np.empty(width)
    zeroed = np.empty(width)
    for r in range(rows):
        v = s[r]
        n, lo, hi, med, thr, mad = _hampel_range(v, width, dev, limit)
        if n == 0:
            continue
        m = hi - lo
        kept[r] = m
        q[0, r] = _quantile_sorted(v[lo:], m, 0.5)
        q[1, r] = _quantile_sorted(v[lo:], m, 0.95)
        q[2, r] = _quantile_sorted(v[lo:], m, 0.99)
        for k in range(width):  # nanmean: the row with what is removed as 0, summed as numpy sums
            y = x[r, k]
            zeroed[k] = y if not np.isnan(y) and (mad == 0 or abs(y - med) <= thr) else 0.0
        if m > 0:
            mean[r] = _pairwise_sum(zeroed, width) / m
    return mean, q, kept


@nb.njit(cache=True, nogil=True)
def _hampel_medians(s, limit):  # pragma: no cover - compiled
    """Per sorted row of ``s`` (NaN last): its NaNs (lost probes) and the p50 and p95 of what Hampel
    keeps (_hampel_rows' values for those, bit for bit), without the mean."""
    rows, width = s.shape
    q = np.full((2, rows), np.nan)
    n_lost = np.zeros(rows, np.int64)
    dev = np.empty(width)
    for r in range(rows):
        v = s[r]
        n, lo, hi, _, _, _ = _hampel_range(v, width, dev, limit)
        n_lost[r] = width - n
        if n:
            q[0, r] = _quantile_sorted(v[lo:], hi - lo, 0.5)
            q[1, r] = _quantile_sorted(v[lo:], hi - lo, 0.95)
    return n_lost, q


def observe(rtt_ms: np.ndarray, loss: np.ndarray, model: ProbeModel, seed: int,
            jitter: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One window of results per path, drawn around the truth (``rtt_ms``, ``loss``) with ``seed``
    (``jitter``: per-path spreads, see :func:`draw_probes`): every field of :func:`window_results`."""
    return window_results(draw_probes(rtt_ms, loss, model, np.random.default_rng(seed), jitter), model.hampel_k)


def observe_medians(rtt_ms: np.ndarray, loss: np.ndarray, model: ProbeModel, seed: int,
                    jitter: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The same windows as :func:`observe` (the same draws), but only count, lost, loss, p50 and p95:
    what the replay's scheduler reads, the same values bit for bit, in one compiled pass over the
    sorted draws."""
    rtt = np.ascontiguousarray(rtt_ms, np.float64)
    return medians_from_draws(rtt, loss, model, probe_draws(rtt.shape[0], model, np.random.default_rng(seed)), jitter)


def medians_from_draws(rtt: np.ndarray, loss: np.ndarray, model: ProbeModel, draws: tuple[np.ndarray, ...],
                       jitter: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:func:`observe_medians` from a window's draws (:func:`probe_draws`). Each path's window is its
    own: a path's values depend on its own row of the draws, its RTT, loss and jitter only (a window
    drawn ahead stays right for every path whose truth did not change meanwhile)."""
    samples = _samples(np.ascontiguousarray(rtt, np.float64), loss, model, draws, jitter)
    n_lost, q = _hampel_medians(np.sort(samples, axis=1), model.hampel_k * MAD_TO_SIGMA)
    count = np.full(samples.shape[0], model.probes, np.int64)
    return {"count": count, "lost": n_lost, "p50": q[0], "p95": q[1], "loss": n_lost / model.probes}
