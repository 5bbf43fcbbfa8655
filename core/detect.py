"""Degradation detection on a path's recent window results: a sustained rise above the path's own
floor, kept as one incident while it lasts, and loss clearly above the path's own loss.

Latency leg, per window t of a series of window statistics (p95 RTT; NaN = no window):
- floor: the ``floor_q`` quantile of the ``baseline`` known windows before the last ``k``, and its
  spread (1.4826 x the median distance of those windows from the floor). A low quantile, not the
  median: a path that was congested an hour ago keeps its uncongested floor, so the next episode is
  a rise again (on the real RIPE Atlas traces, half of the rises missed by a median baseline were
  such repeats);
- ratio: the lowest of the last ``k`` known windows over the floor, where it is above the floor by
  ``min_sigmas`` x the spread (a quiet path's jitter is not a rise), else 0 — what the live path reads
  (:func:`ratio_now`, core.reschedule's shift factors); ``peak``: the highest of them, alike;
- an incident starts where the ratio is at least ``sustain`` and the peak at least ``factor`` (one
  spike is one window: never an incident with k >= 2); it lasts while the newest window is at least
  ``release`` x the floor, and ``hold`` windows more (alerting's keep_firing_for: a congestion
  episode whose windows dip now and then is one incident, not many). A window without a value
  leaves the incident as it was.
Defaults (60 windows of baseline, the 5 % floor, k = 2, 1.22x / 1.01x, 30 sigmas, release 1.05x, hold
30, the loss leg: 3 probes lost over 3 windows) are the policy chosen most often by leave-files-out
cross-validation on the real labelled RTT traces of ../shared/data/rtt/real_labelled at 0.05 strict
false alarms per path-day (`cnsched bench detect --cv`; README "Degradation detection" has the
figures), and checked on the artificial ones. Read together: a rise is both windows clearly out of
the path's own noise (30 spreads; on a quiet 69 ms path with a 0.2 ms spread that is 6 ms) and one of
them 22 % up — the sigmas, not the ratio, keep a noisy path's jitter out.
The seeds' rule "latency doubles" is ``factor=sustain=release=2, k=1, floor_q=0.5, min_sigmas=0, hold=0``.

Loss leg: ``lost`` of ``count`` probes in the last ``loss_windows`` windows against the path's own loss rate over
the baseline windows (at least ``loss_floor``): an alarm when at least ``loss_min`` probes were lost (on
one ping a window: a run of ``loss_min`` failed pings, an outage; two failed pings in a row were 13 of
the 32 strict false alarms on the real traces and caught no labelled rise), the share lost is above
``loss_limit`` and the binomial tail P(X >= lost | count, p0) is below ``alpha``, bounded by the Chernoff bound
exp(-count x KL(lost/count || p0)) (no table, vectorised). Too few probes cannot pass it: 1 lost of
50 at p0 = 0.1 % has a tail of ~5 %.

Vectorised over series; ``alarms`` gives every window of a history at once (backtests, benchmarks),
``ratio_now`` the newest window only (the live path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from core.quiet import quiet_nan_warnings
from core.vocabulary import MAD_TO_SIGMA


@dataclass(frozen=True)
class DetectorPolicy:
    factor: float = 1.22
    sustain: float = 1.01
    k: int = 2
    baseline: int = 60
    floor_q: float = 0.05
    min_sigmas: float = 30.0
    release: float = 1.05
    hold: int = 30
    loss_windows: int = 3
    loss_min: int = 3
    loss_limit: float = 0.01
    loss_floor: float = 0.001
    alpha: float = 1e-3

    def __post_init__(self) -> None:
        if not 1 < self.sustain <= self.factor or self.k < 1 or self.baseline < 1 or self.min_sigmas < 0:
            raise ValueError("factor >= sustain > 1, k >= 1, baseline >= 1 and min_sigmas >= 0")
        if not 0 < self.floor_q < 1 or self.release <= 0 or self.hold < 0 or self.loss_windows < 1 or self.loss_min < 1:
            raise ValueError("0 < floor_q < 1, release > 0, hold >= 0, loss_windows >= 1 and loss_min >= 1")
        if not 0 <= self.loss_limit < 1 or not 0 < self.loss_floor < 1 or not 0 < self.alpha <= 1:
            raise ValueError("0 <= loss_limit < 1, 0 < loss_floor < 1 and 0 < alpha <= 1")

    @property
    def memory(self) -> int:
        """Windows the latency leg reads: the baseline and the recent ones."""
        return self.baseline + self.k


DEFAULT_POLICY = DetectorPolicy()
# "latency doubles or loss > 1 %": alpha = 1 drops the binomial test (any loss above 1 % and the path's own)
SEED_RULE = DetectorPolicy(factor=2.0, sustain=2.0, k=1, baseline=15, floor_q=0.5, min_sigmas=0.0, release=2.0,
                           hold=0, loss_windows=1, loss_min=1, alpha=1.0)


def _known_windows(x: np.ndarray, width: int) -> np.ndarray:
    """float[S, T, width]: for every t, the last ``width`` known values up to and including t, oldest
    first (NaN-padded in front where fewer are known)."""
    s, t = x.shape
    ok = np.isfinite(x)
    out = np.full((s, t, width), np.nan)
    rank = np.cumsum(ok, axis=1) - 1  # the position of each known value among the row's known values
    for r in range(s):
        vals = x[r, ok[r]]
        pos = rank[r]
        for j in range(width):
            src = pos - (width - 1 - j)
            good = src >= 0
            out[r, good, j] = vals[src[good]]
    return out


def _windows(x: np.ndarray, policy: DetectorPolicy) -> np.ndarray:
    """float[S, T, memory]: the known windows each window's decision reads (oldest first)."""
    width = policy.memory
    if np.isfinite(x).all() and x.shape[1] >= width:  # no gaps: plain sliding windows
        w = np.full(x.shape + (width,), np.nan)
        w[:, width - 1:] = np.lib.stride_tricks.sliding_window_view(x, width, axis=1)
        return w
    return _known_windows(x, width)


def _stats(w: np.ndarray, policy: DetectorPolicy) -> tuple[np.ndarray, ...]:
    """(floor, spread, low, high) of windows ``w[..., memory]`` (oldest first; NaN-padded: the floor
    is NaN until the baseline is full): what depends on the baseline, ``floor_q`` and ``k`` only.
    One compiled pass per row (:func:`_stats_rows`), the same values bit for bit as numpy's
    ``quantile``, ``median``, ``min`` and ``max`` of the rows (see the tests)."""
    rows = np.ascontiguousarray(w, np.float64).reshape(-1, w.shape[-1])
    out = _stats_rows(rows, policy.baseline, policy.floor_q)
    floor, mad, low, high = (a.reshape(w.shape[:-1]) for a in out)
    return floor, MAD_TO_SIGMA * mad, low, high


@nb.njit(cache=True)
def _stats_rows(w, baseline, floor_q):  # pragma: no cover - compiled (tested against numpy)
    """Per row of ``w``: numpy's linear ``quantile(base, floor_q)``, ``median(|base - floor|)``
    (NaN where the base holds a NaN), ``min`` and ``max`` of the recent windows (NaN if one is)."""
    rows, width = w.shape
    n = baseline
    floor, mad = np.full(rows, np.nan), np.full(rows, np.nan)
    low, high = np.full(rows, np.nan), np.full(rows, np.nan)
    base, dev = np.empty(n), np.empty(n)
    virtual = (n - 1) * floor_q
    prev = np.floor(virtual)
    gamma = virtual - prev
    i = int(prev)
    j = min(i + 1, n - 1)
    if virtual >= n - 1:
        i = j = n - 1
    for r in range(rows):
        lo, hi, nan = np.inf, -np.inf, False
        for c in range(n, width):
            v = w[r, c]
            if np.isnan(v):
                nan = True
            lo, hi = min(lo, v), max(hi, v)
        if not nan:
            low[r], high[r] = lo, hi
        nan = False
        for c in range(n):
            base[c] = w[r, c]
            nan |= np.isnan(base[c])
        if nan:
            continue
        base.sort()
        a, b = base[i], base[j]
        d = b - a
        f = b - d * (1.0 - gamma) if gamma >= 0.5 else a + d * gamma  # numpy's _lerp
        floor[r] = f
        for c in range(n):
            dev[c] = abs(base[c] - f)
        dev.sort()
        if not np.isnan(dev[n - 1]):  # NaN from infinite windows: numpy's median is NaN too
            mad[r] = dev[n // 2] if n % 2 else (dev[n // 2 - 1] + dev[n // 2]) / 2.0
    return floor, mad, low, high


def _ratios(stats: tuple[np.ndarray, ...], policy: DetectorPolicy) -> tuple[np.ndarray, np.ndarray]:
    """(ratio, peak) from :func:`_stats`: the lowest and highest recent window over the floor where
    the lowest is above it by ``min_sigmas`` x the spread, else 0."""
    floor, spread, low, high = stats
    with quiet_nan_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        rises = (floor > 0) & (low - floor > policy.min_sigmas * spread)
        ratio, peak = np.where(rises, low / floor, 0.0), np.where(rises, high / floor, 0.0)
    return np.where(np.isfinite(ratio), ratio, 0.0), np.where(np.isfinite(peak), peak, 0.0)


def window_stats(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> tuple[np.ndarray, ...]:
    """(floor, spread, low, high) float[S, T] at every window of a history: the costly part of
    :func:`alarms`, shared by policies that differ only in their thresholds (a tuning sweep)."""
    return _stats(_windows(_series(p95), policy), policy)


def shift_ratios(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """float[S, T]: at every window, the lowest of the last ``k`` known windows over the floor where
    it is above the floor by ``min_sigmas`` x the spread, else 0 (0 too at windows without a value and
    before the baseline has ``baseline`` known windows)."""
    x = _series(p95)
    return np.where(np.isfinite(x), _ratios(window_stats(x, policy), policy)[0], 0.0)


def _series(p95) -> np.ndarray:
    x = np.asarray(p95, np.float64)
    if x.ndim != 2:
        raise ValueError("p95 must be [series, windows]")
    return x


def alarms(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY, stats: tuple | None = None) -> np.ndarray:
    """bool[S, T]: the latency leg's incidents at every window (module docstring): False before the
    baseline has ``baseline`` known windows; a window without a value keeps the state before it.
    ``stats``: :func:`window_stats` of the same history and baseline, when the caller has them."""
    x = _series(p95)
    stats = window_stats(x, policy) if stats is None else stats
    ratio, peak = _ratios(stats, policy)
    known = np.isfinite(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        now = np.where(known & (stats[0] > 0), x / stats[0], 0.0)
    start = known & (ratio >= policy.sustain) & (peak >= policy.factor)
    return _incidents(start, known, np.nan_to_num(now), policy.release, policy.hold)


@nb.njit(cache=True)
def _incidents(start, known, now, release, hold):  # pragma: no cover - compiled (tested against a plain loop)
    out = np.zeros(start.shape, np.bool_)
    for s in range(start.shape[0]):
        on, left = False, 0
        for t in range(start.shape[1]):
            if start[s, t]:
                on, left = True, hold
            elif on and known[s, t]:
                if now[s, t] >= release:
                    left = hold
                elif left > 0:
                    left -= 1
                else:
                    on = False
            out[s, t] = on
    return out


def _newest(p95: np.ndarray, policy: DetectorPolicy) -> tuple[np.ndarray, np.ndarray]:
    """(float[S, memory] each series' last known windows, oldest first and NaN-padded; bool[S] its
    newest window has a value)."""
    x = np.ascontiguousarray(p95, np.float64)
    return _last_known(x, policy.memory), np.isfinite(x[:, -1]) if x.shape[1] else np.zeros(x.shape[0], bool)


@nb.njit(cache=True)
def _last_known(x, width):  # pragma: no cover - compiled (tested against the numpy composition)
    """float[S, width]: each row's last ``width`` finite values, oldest first, NaN-padded in front."""
    out = np.full((x.shape[0], width), np.nan)
    for r in range(x.shape[0]):
        j = width - 1
        for c in range(x.shape[1] - 1, -1, -1):
            if j < 0:
                break
            if np.isfinite(x[r, c]):
                out[r, j] = x[r, c]
                j -= 1
    return out


def ratio_now(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """float[S]: :func:`shift_ratios` at the newest window of each series (its last column)."""
    w, ok = _newest(p95, policy)
    return np.where(ok, _ratios(_stats(w, policy), policy)[0], 0.0)


def loss_alarm(lost: np.ndarray, count: np.ndarray, base_lost: np.ndarray, base_count: np.ndarray,
               policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S]: the loss leg (module docstring): ``lost``/``count`` probes in the recent windows,
    ``base_lost``/``base_count`` over the baseline windows."""
    lost, count = np.asarray(lost, np.float64), np.asarray(count, np.float64)
    bl, bc = np.asarray(base_lost, np.float64), np.asarray(base_count, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p0 = np.maximum(np.where(bc > 0, bl / bc, 0.0), policy.loss_floor)
        q = np.where(count > 0, lost / count, 0.0)
    return (lost >= policy.loss_min) & (q > policy.loss_limit) & (q > p0) & (loss_tail(q, count, p0) < policy.alpha)


def loss_alarms(lost: np.ndarray, count: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S, T]: the loss leg at every window of a history: ``lost``/``count`` probes per window
    (float[S, T]); the recent windows are the last ``loss_windows``, the baseline the ``baseline`` before them
    (False until the history holds both)."""
    lost, count = np.asarray(lost, np.float64), np.asarray(count, np.float64)
    if lost.ndim != 2 or lost.shape != count.shape:
        raise ValueError("lost and count must be [series, windows] of one shape")
    s, n = lost.shape
    cl = np.c_[np.zeros(s), np.cumsum(np.nan_to_num(lost), axis=1)]
    cc = np.c_[np.zeros(s), np.cumsum(np.nan_to_num(count), axis=1)]
    t = np.arange(n)
    k = policy.loss_windows
    lo, mid = np.maximum(t - k + 1, 0), np.maximum(t - k - policy.baseline + 1, 0)
    out = loss_alarm(cl[:, t + 1] - cl[:, lo], cc[:, t + 1] - cc[:, lo], cl[:, lo] - cl[:, mid],
                     cc[:, lo] - cc[:, mid], policy)
    return out & (t >= k + policy.baseline - 1)


def loss_tail(q: np.ndarray, count: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Chernoff bound on P(X >= q x count) for X ~ Binomial(count, p0), q > p0 (1 elsewhere):
    exp(-count x KL(q || p0))."""
    q, count, p0 = (np.asarray(v, np.float64) for v in (q, count, p0))
    with np.errstate(invalid="ignore", divide="ignore"):
        kl = (np.where(q > 0, q * np.log(q / p0), 0.0)
              + np.where(q < 1, (1 - q) * np.log((1 - q) / (1 - p0)), -np.log(1 - p0)))
        return np.where(q > p0, np.exp(-np.nan_to_num(count) * kl), 1.0)
