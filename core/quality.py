"""Path quality 0-100 from window statistics, and node network summaries.

Each dimension goes through a utility curve: 100 at or better than ``good``, 0 at or worse than
``bad``, linear in between (on a log scale for ``log`` curves, e.g. RTT spanning 0.1 ms to 300 ms).
Quality is the weighted mean of the dimensions a path has data for (missing ones, NaN, are left
out and the weights of the others renormalised); a path with no data at all has quality NaN.

Dimensions: p95 RTT (ms), loss (0..1), bandwidth headroom (1 - utilisation), retransmission rate
(0..1), jitter (p95 - p50 RTT, ms). A task's network profile picks the weights: latency-heavy jobs
weigh RTT and jitter, bandwidth-heavy ones headroom and loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

DIMENSIONS = ("rtt", "loss", "bw_headroom", "retrans", "jitter")


@dataclass(frozen=True)
class Curve:
    good: float
    bad: float
    log: bool = False

    def __post_init__(self) -> None:
        if self.good == self.bad:
            raise ValueError("a utility curve needs good != bad")
        if self.log and (self.good <= 0 or self.bad <= 0):
            raise ValueError("a log utility curve needs positive bounds")


def utility(x: np.ndarray, curve: Curve) -> np.ndarray:
    """0..100: 100 at ``good`` or better, 0 at ``bad`` or worse; NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    if curve.log:
        with np.errstate(divide="ignore", invalid="ignore"):
            lx = np.log(np.maximum(x, 1e-300))
        u = (np.log(curve.bad) - lx) / (np.log(curve.bad) - np.log(curve.good))
    else:
        u = (curve.bad - x) / (curve.bad - curve.good)
    return np.where(np.isnan(x), np.nan, np.clip(u, 0.0, 1.0) * 100.0)


DEFAULT_CURVES: dict[str, Curve] = {
    "rtt": Curve(good=0.5, bad=300.0, log=True),
    "loss": Curve(good=0.0, bad=0.05),
    "bw_headroom": Curve(good=0.7, bad=0.0),
    "retrans": Curve(good=0.0, bad=0.02),
    "jitter": Curve(good=0.05, bad=50.0, log=True),
}

PROFILES: dict[str, dict[str, float]] = {
    "balanced": {"rtt": 0.35, "loss": 0.25, "bw_headroom": 0.15, "retrans": 0.10, "jitter": 0.15},
    "latency": {"rtt": 0.45, "loss": 0.20, "bw_headroom": 0.05, "retrans": 0.05, "jitter": 0.25},
    "bandwidth": {"rtt": 0.10, "loss": 0.20, "bw_headroom": 0.45, "retrans": 0.15, "jitter": 0.10},
    # model parallelism exchanges activations both ways every step: latency and headroom alike, and
    # the path is as good as its worse direction (worse_direction)
    "duplex": {"rtt": 0.30, "loss": 0.20, "bw_headroom": 0.30, "retrans": 0.10, "jitter": 0.10},
}
BOTH_WAYS = frozenset({"duplex"})  # profiles whose paths count at the worse of their two directions


def worse_direction(q: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Each path's quality at the worse of it and its reverse path (src and dst swapped), where the
    reverse is measured; as it is elsewhere; a path without data (NaN) takes its reverse's."""
    q = np.asarray(q)
    if q.size == 0:
        return q.copy()
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    m = int(max(src.max(), dst.max())) + 1
    key = src * m + dst
    order = np.argsort(key, kind="stable")
    pos = np.searchsorted(key[order], dst * m + src)
    pos = np.minimum(pos, key.size - 1)
    found = key[order][pos] == dst * m + src
    rev = np.where(found, q[order][pos], np.nan)
    return np.where(np.isnan(rev), q, np.fmin(q, rev)).astype(q.dtype)


@dataclass(frozen=True)
class QualityModel:
    curves: dict[str, Curve] = field(default_factory=lambda: dict(DEFAULT_CURVES))
    profiles: dict[str, dict[str, float]] = field(default_factory=lambda: dict(PROFILES))

    def weights(self, profile: str) -> np.ndarray:
        if profile not in self.profiles:
            raise KeyError(f"unknown network profile {profile!r}; known: {', '.join(self.profiles)}")
        w = np.array([self.profiles[profile].get(d, 0.0) for d in DIMENSIONS], dtype=np.float64)
        if w.sum() <= 0:
            raise ValueError(f"profile {profile!r} has no positive weight")
        return w / w.sum()


DEFAULT_MODEL = QualityModel()


def dimension_utilities(
    p95_rtt_ms: np.ndarray,
    loss: np.ndarray,
    bw_util: np.ndarray,
    retrans: np.ndarray,
    jitter_ms: np.ndarray,
    model: QualityModel = DEFAULT_MODEL,
) -> np.ndarray:
    """float64[n, 5]: each path's utility per dimension (DIMENSIONS order), NaN where no data."""
    headroom = 1.0 - np.asarray(bw_util, dtype=np.float64)
    cols = (p95_rtt_ms, loss, headroom, retrans, jitter_ms)
    return np.stack([utility(c, model.curves[d]) for c, d in zip(cols, DIMENSIONS, strict=True)], axis=-1)


def combine(utilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted mean over the dimensions present (not NaN); NaN when none is. Compiled for one weight
    per dimension (a path table's hundreds of thousands of paths: numpy's reductions over a last axis
    of five took 0.1 s at 5,000 nodes); :func:`combine_reference` otherwise, and as the reference."""
    u = np.asarray(utilities, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or u.ndim < 1 or w.shape[0] != u.shape[-1]:
        return combine_reference(u, w)
    flat = np.ascontiguousarray(u.reshape(-1, u.shape[-1]))
    return _combine_rows(flat, np.ascontiguousarray(w)).reshape(u.shape[:-1])


@nb.njit(cache=True)
def _combine_rows(u, w):  # pragma: no cover - compiled (tested against combine_reference)
    n, d = u.shape
    out = np.empty(n, np.float64)
    for i in range(n):
        total = 0.0
        weighted = 0.0
        for k in range(d):
            v = u[i, k]
            if not np.isnan(v):
                total += w[k]
                weighted += v * w[k]
        out[i] = weighted / total if total > 0 else np.nan
    return out


def combine_reference(utilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`combine` in plain numpy (any weights that broadcast over the utilities)."""
    u = np.asarray(utilities, dtype=np.float64)
    present = ~np.isnan(u)
    w = np.where(present, weights, 0.0)
    total = w.sum(axis=-1)
    weighted = (np.where(present, u, 0.0) * w).sum(axis=-1)
    return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), np.nan)


def path_quality(
    p95_rtt_ms, loss, bw_util, retrans, jitter_ms, profile: str = "balanced", model: QualityModel = DEFAULT_MODEL
) -> np.ndarray:
    """Quality 0..100 of every path for one network profile."""
    u = dimension_utilities(p95_rtt_ms, loss, bw_util, retrans, jitter_ms, model)
    return combine(u, model.weights(profile))


def mean_by_group(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of ``values`` per group id (NaN values ignored); NaN for groups with none."""
    group = np.asarray(group, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(values)
    s = np.bincount(group[ok], weights=values[ok], minlength=n_groups)
    c = np.bincount(group[ok], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, s / np.maximum(c, 1), np.nan)


UNKNOWN_QUALITY = 50.0  # a path without (fresh) data: neither good nor bad (what core.scoring scores it)


@dataclass(frozen=True)
class Freshness:
    """How a path's latest window ages: fully trusted for ``fresh_s`` after it ended, trusted less and
    less until ``stale_s``, unknown from then on (a probe that stopped says nothing of the path now)."""

    fresh_s: float = 60.0
    stale_s: float = 300.0

    def __post_init__(self) -> None:
        if not (0 <= self.fresh_s < self.stale_s):
            raise ValueError(f"need 0 <= fresh_s < stale_s, got {self.fresh_s} and {self.stale_s}")

    def confidence(self, age_s) -> np.ndarray:
        """float64: 1 while fresh, falling linearly to 0 at ``stale_s``; 0 beyond it and where the
        age is unknown (NaN: no window at all)."""
        age = np.asarray(age_s, np.float64)
        with np.errstate(invalid="ignore"):
            c = np.clip(1.0 - (age - self.fresh_s) / (self.stale_s - self.fresh_s), 0.0, 1.0)
        return np.where(np.isnan(age) | (age >= self.stale_s), 0.0, c)

    def state(self, age_s: float) -> str:
        """``fresh``, ``aging`` or ``stale`` (stale: scored as unknown)."""
        if not age_s < self.stale_s:
            return "stale"
        return "fresh" if age_s <= self.fresh_s else "aging"


def aged_quality(q, age_s, freshness: Freshness, unknown: float = UNKNOWN_QUALITY) -> np.ndarray:
    """float64: each path's quality as its age allows — drawn towards ``unknown`` by the lost
    confidence (``unknown + c x (q - unknown)``), NaN (unknown: the scorer's neutral value) once stale.
    Worked: q 90, fresh 60 s, stale 300 s, age 180 s: c = 0.5, 50 + 0.5 x 40 = 70."""
    q = np.asarray(q, np.float64)
    c = freshness.confidence(age_s)
    return np.where(c > 0, unknown + c * (q - unknown), np.nan)


DEFAULT_LINK_GBPS = 10.0  # a node that reports no interconnect speed
HEADROOM_FLOOR = 0.05  # a saturated NIC still moves some data: never plan with less than 5 % of the link


TCP_WINDOW_BYTES = 64 * 2**20  # a tuned bulk transfer's window: one window per round trip at most


def window_gbps(rtt_ms) -> np.ndarray:
    """float64[...]: what one ``TCP_WINDOW_BYTES`` window per round trip carries, Gbit/s (inf where the
    RTT is 0 or unknown: no bound). Worked: 50 ms -> 64 MiB x 8 / 0.05 s = 10.7 Gbit/s."""
    rtt = np.asarray(rtt_ms, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = TCP_WINDOW_BYTES * 8 / (rtt / 1000.0) / 1e9
    return np.where(np.isfinite(w) & (rtt > 0), w, np.inf)


def path_bandwidth_gbps(node_link_gbps: np.ndarray, endpoint_link_gbps: np.ndarray,
                        node_headroom: np.ndarray, rtt_ms: np.ndarray | None = None) -> np.ndarray:
    """float32[E, N]: usable bandwidth between endpoint e and node n — the slower of the two links,
    times the node's NIC headroom (1 - utilisation, at least ``HEADROOM_FLOOR``), and no more than
    one ``TCP_WINDOW_BYTES`` window per round trip where the path's RTT (``rtt_ms`` [E, N], NaN
    unknown) is known: the bandwidth-delay product bounds a transfer over a long path (a store
    200 ms away gives at most 2.7 Gbit/s however fast the links). Worked: 100 Gbit/s links, 40 %
    busy, 50 ms: min(60, 64 MiB x 8 / 0.05 s = 10.7) = 10.7 Gbit/s."""
    link = np.minimum(np.asarray(node_link_gbps)[None, :], np.asarray(endpoint_link_gbps)[:, None])
    bw = link * np.maximum(np.asarray(node_headroom), HEADROOM_FLOOR)[None, :]
    if rtt_ms is not None:
        bw = np.minimum(bw, window_gbps(rtt_ms))
    return bw.astype(np.float32)
