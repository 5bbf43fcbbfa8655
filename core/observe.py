"""What probes would have reported: window results drawn around a ground truth (for the replay).

For each path, a window of ``probes`` active probes: each is lost with the path's true loss rate;
the others measure ``rtt x lognormal(0, jitter)`` and a share ``spike_share`` of them is an outlier
(``spike_factor`` times slower: queueing, a reroute's first packets). The window's statistics are
those the worker reports: Hampel outlier removal (|x - median| > k x 1.4826 x MAD), then mean and
p50/p95/p99 of what is kept, ``count`` (lost included), ``lost``. The scheduler of the replay sees
only these, never the truth. Vectorised over paths; seeded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.quiet import quiet_nan_warnings
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
    float[P] each path's own lognormal sigma (a measured spread), instead of the model's."""
    rtt = np.asarray(rtt_ms, np.float64)[:, None]
    shape = (rtt.shape[0], model.probes)
    sigma = model.jitter if jitter is None else np.asarray(jitter, np.float64)[:, None]
    x = rtt * rng.lognormal(0.0, sigma, shape)
    x = np.where(rng.random(shape) < model.spike_share, x * model.spike_factor, x)
    return np.where(rng.random(shape) < np.asarray(loss, np.float64)[:, None], np.nan, x)


def window_results(samples: np.ndarray, hampel_k: float = 3.0) -> dict[str, np.ndarray]:
    """The worker's window statistics of each row of ``samples`` (NaN = lost), vectorised."""
    x = np.asarray(samples, np.float64)
    count = np.full(x.shape[0], x.shape[1], np.int64)
    lost = np.isnan(x).sum(axis=1)
    with np.errstate(invalid="ignore"), quiet_nan_warnings():
        med = row_quantiles(x, [0.5])[0][:, None]
        mad = row_quantiles(np.abs(x - med), [0.5])[0][:, None]
        keep = ~np.isnan(x) & ((mad == 0) | (np.abs(x - med) <= hampel_k * MAD_TO_SIGMA * mad))
        kept = np.where(keep, x, np.nan)
        q = row_quantiles(kept, [0.5, 0.95, 0.99])
        mean = np.nanmean(kept, axis=1)
    n_kept = keep.sum(axis=1)
    return {"count": count, "lost": lost, "kept": n_kept, "outliers": count - lost - n_kept, "mean": mean,
            "p50": q[0], "p95": q[1], "p99": q[2], "loss": np.where(count > 0, lost / np.maximum(count, 1), np.nan)}


def row_quantiles(x: np.ndarray, qs) -> np.ndarray:
    """float64[len(qs), rows]: each row's quantiles ignoring NaN (numpy's linear method, as
    ``np.nanquantile(x, qs, axis=1)``; NaN for a row without values), by one sort of all rows."""
    x = np.asarray(x, np.float64)
    rows = x.shape[0]
    if x.size == 0:
        return np.full((len(qs), rows), np.nan)
    s = np.sort(x, axis=1)  # NaN last
    n = (~np.isnan(x)).sum(axis=1)
    r = np.arange(rows)
    out = np.full((len(qs), rows), np.nan)
    for k, q in enumerate(qs):
        pos = q * np.maximum(n - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        v = s[r, lo] + (pos - lo) * (s[r, hi] - s[r, lo])
        out[k] = np.where(n > 0, v, np.nan)
    return out


def observe(rtt_ms: np.ndarray, loss: np.ndarray, model: ProbeModel, seed: int,
            jitter: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One window of results per path, drawn around the truth (``rtt_ms``, ``loss``) with ``seed``
    (``jitter``: per-path spreads, see :func:`draw_probes`)."""
    return window_results(draw_probes(rtt_ms, loss, model, np.random.default_rng(seed), jitter), model.hampel_k)
