"""Degradation detection on a path's recent window results: a sustained shift against a baseline that
follows the path's own regime, and loss clearly above the path's own loss.

Latency leg, per window t of a series of window statistics (p95 RTT; NaN = no window):
- baseline: the median of the ``baseline`` known windows before the last ``k`` (it follows a new
  regime once that regime fills half of it);
- recent: the last ``k`` known windows — a sustained shift needs every one of them at or above
  ``factor`` x the baseline and above it by ``min_sigmas`` x the baseline's robust spread (1.4826 x
  MAD; a quiet path's jitter is not a shift). One spike is one window: never an alarm with k >= 2.
Defaults (15 windows of baseline, k = 2, 1.15x, 8 sigmas) were chosen on the even-numbered labelled
RTT traces of ../shared/data/rtt and checked on the odd ones (`cnsched bench detect`).
The seeds' rule "latency doubles" is ``factor=2, k=1, min_sigmas=0``.

Loss leg: ``lost`` of ``count`` probes in the last ``k`` windows against the path's own loss rate over
the baseline windows (at least ``loss_floor``): an alarm when the share lost is above ``loss_limit``
and the binomial tail P(X >= lost | count, p0) is below ``alpha``, bounded by the Chernoff bound
exp(-count x KL(lost/count || p0)) (no table, vectorised). Too few probes cannot pass it: 1 lost of
50 at p0 = 0.1 % has a tail of ~5 %.

Vectorised over series; ``alarms`` gives every window of a history at once (backtests, benchmarks),
``alarm_now`` the newest window only (the live path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.quiet import quiet_nan_warnings
from core.vocabulary import MAD_TO_SIGMA


@dataclass(frozen=True)
class DetectorPolicy:
    factor: float = 1.15
    k: int = 2
    baseline: int = 15
    min_sigmas: float = 8.0
    loss_limit: float = 0.01
    loss_floor: float = 0.001
    alpha: float = 1e-3

    def __post_init__(self) -> None:
        if self.factor <= 1 or self.k < 1 or self.baseline < 1 or self.min_sigmas < 0:
            raise ValueError("factor > 1, k >= 1, baseline >= 1 and min_sigmas >= 0")
        if not 0 <= self.loss_limit < 1 or not 0 < self.loss_floor < 1 or not 0 < self.alpha <= 1:
            raise ValueError("0 <= loss_limit < 1, 0 < loss_floor < 1 and 0 < alpha <= 1")


DEFAULT_POLICY = DetectorPolicy()
# "latency doubles or loss > 1 %": alpha = 1 drops the binomial test (any loss above 1 % and the path's own)
SEED_RULE = DetectorPolicy(factor=2.0, k=1, min_sigmas=0.0, alpha=1.0)


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


def shift_ratios(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """float[S, T]: at every window, the lowest of the last ``k`` known windows over the baseline's
    median where it is above the baseline by ``min_sigmas`` x the spread, else 0 (0 too at windows
    without a value and before the baseline has ``baseline`` known windows). ``factor`` is not
    applied: an alarm is a ratio at or above it (so one pass serves several sensitivities)."""
    x = np.asarray(p95, np.float64)
    if x.ndim != 2:
        raise ValueError("p95 must be [series, windows]")
    width = policy.baseline + policy.k
    if np.isfinite(x).all() and x.shape[1] >= width:  # no gaps: plain sliding windows
        w = np.full(x.shape + (width,), np.nan)
        w[:, width - 1:] = np.lib.stride_tricks.sliding_window_view(x, width, axis=1)
    else:
        w = _known_windows(x, width)
    return np.where(np.isfinite(x), _ratio(w, policy), 0.0)


def _ratio(w: np.ndarray, policy: DetectorPolicy) -> np.ndarray:
    """The shift ratio of windows ``w[..., baseline + k]`` (oldest first; NaN-padded: no ratio)."""
    base, recent = w[..., : policy.baseline], w[..., policy.baseline:]
    with quiet_nan_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        level = np.median(base, axis=-1)  # NaN until the baseline is full
        spread = MAD_TO_SIGMA * np.median(np.abs(base - level[..., None]), axis=-1)
        low = np.min(recent, axis=-1)
        ratio = np.where((level > 0) & (low - level > policy.min_sigmas * spread), low / level, 0.0)
    return np.where(np.isfinite(ratio), ratio, 0.0)


def alarms(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S, T]: the latency leg at every window (at windows with a value; False before the
    baseline has ``baseline`` known windows)."""
    return shift_ratios(p95, policy) >= policy.factor


def ratio_now(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """float[S]: :func:`shift_ratios` at the newest window of each series (its last column)."""
    x = np.asarray(p95, np.float64)
    width = policy.baseline + policy.k
    if not x.shape[1]:
        return np.zeros(x.shape[0])
    ok = np.isfinite(x)
    packed = np.take_along_axis(x, np.argsort(ok, axis=1, kind="stable"), axis=1)  # known ones last, in order
    w = packed[:, -width:] if x.shape[1] >= width else np.c_[np.full((x.shape[0], width - x.shape[1]), np.nan), packed]
    return np.where(ok[:, -1], _ratio(w, policy), 0.0)


def alarm_now(p95: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S]: the latency leg at the newest window of each series (its last column)."""
    return ratio_now(p95, policy) >= policy.factor


def loss_alarm(lost: np.ndarray, count: np.ndarray, base_lost: np.ndarray, base_count: np.ndarray,
               policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S]: the loss leg (module docstring): ``lost``/``count`` probes in the recent windows,
    ``base_lost``/``base_count`` over the baseline windows."""
    lost, count = np.asarray(lost, np.float64), np.asarray(count, np.float64)
    bl, bc = np.asarray(base_lost, np.float64), np.asarray(base_count, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p0 = np.maximum(np.where(bc > 0, bl / bc, 0.0), policy.loss_floor)
        q = np.where(count > 0, lost / count, 0.0)
    return (count > 0) & (q > policy.loss_limit) & (q > p0) & (loss_tail(q, count, p0) < policy.alpha)


def loss_alarms(lost: np.ndarray, count: np.ndarray, policy: DetectorPolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[S, T]: the loss leg at every window of a history: ``lost``/``count`` probes per window
    (float[S, T]); the recent windows are the last ``k``, the baseline the ``baseline`` before them
    (False until the history holds both)."""
    lost, count = np.asarray(lost, np.float64), np.asarray(count, np.float64)
    if lost.ndim != 2 or lost.shape != count.shape:
        raise ValueError("lost and count must be [series, windows] of one shape")
    s, n = lost.shape
    cl = np.c_[np.zeros(s), np.cumsum(np.nan_to_num(lost), axis=1)]
    cc = np.c_[np.zeros(s), np.cumsum(np.nan_to_num(count), axis=1)]
    t = np.arange(n)
    lo, mid = np.maximum(t - policy.k + 1, 0), np.maximum(t - policy.k - policy.baseline + 1, 0)
    out = loss_alarm(cl[:, t + 1] - cl[:, lo], cc[:, t + 1] - cc[:, lo], cl[:, lo] - cl[:, mid],
                     cc[:, lo] - cc[:, mid], policy)
    return out & (t >= policy.k + policy.baseline - 1)


def loss_tail(q: np.ndarray, count: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Chernoff bound on P(X >= q x count) for X ~ Binomial(count, p0), q > p0 (1 elsewhere):
    exp(-count x KL(q || p0))."""
    q, count, p0 = (np.asarray(v, np.float64) for v in (q, count, p0))
    with np.errstate(invalid="ignore", divide="ignore"):
        kl = (np.where(q > 0, q * np.log(q / p0), 0.0)
              + np.where(q < 1, (1 - q) * np.log((1 - q) / (1 - p0)), -np.log(1 - p0)))
        return np.where(q > p0, np.exp(-np.nan_to_num(count) * kl), 1.0)
