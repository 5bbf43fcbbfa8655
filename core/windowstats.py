"""Window statistics of one series in one window, after Hampel/MAD outlier removal.

This is the plain numpy reference: exact, obvious, and what the faster kernels are tested against.

Semantics (the contract of ``netstate.windows``):
- ``count``: every sample, lost ones included; ``lost``: null/NaN samples (a lost active probe);
- outliers: x with |x - median| > k * 1.4826 * MAD (Hampel, k = 3 by default) among the non-lost
  samples; when MAD is 0 (more than half the samples equal) the scale is undefined and nothing is
  dropped, so a mostly-zero loss series keeps its bursts;
- ``kept`` = count - lost - outliers; ``mean``, ``p50``, ``p95``, ``p99`` (linear interpolation),
  ``min``, ``max`` of the kept samples; NaN when nothing is kept.
"""

from __future__ import annotations

import numpy as np

from core.vocabulary import MAD_TO_SIGMA

DEFAULT_HAMPEL_K = 3.0
STAT_FIELDS = ("count", "kept", "outliers", "lost", "mean", "p50", "p95", "p99", "min", "max")


def hampel_mask(x: np.ndarray, k: float = DEFAULT_HAMPEL_K) -> np.ndarray:
    """True for the samples the Hampel rule keeps (``x`` holds no NaN)."""
    if x.size == 0:
        return np.zeros(0, dtype=bool)
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad == 0:
        return np.ones(x.size, dtype=bool)
    return np.abs(x - med) <= k * MAD_TO_SIGMA * mad


def window_stats_reference(values: np.ndarray, k: float = DEFAULT_HAMPEL_K) -> dict[str, float]:
    """Statistics of one window's samples (NaN = lost), as in ``netstate.windows``."""
    values = np.asarray(values, dtype=np.float64)
    lost_mask = np.isnan(values)
    x = values[~lost_mask]
    keep = hampel_mask(x, k)
    kept = x[keep]
    out = {
        "count": int(values.size),
        "kept": int(kept.size),
        "outliers": int(x.size - kept.size),
        "lost": int(lost_mask.sum()),
    }
    if kept.size:
        p50, p95, p99 = np.percentile(kept, [50, 95, 99])
        out.update(
            mean=float(kept.mean()), p50=float(p50), p95=float(p95), p99=float(p99),
            min=float(kept.min()), max=float(kept.max()),
        )
    else:
        out.update({f: float("nan") for f in ("mean", "p50", "p95", "p99", "min", "max")})
    return out
