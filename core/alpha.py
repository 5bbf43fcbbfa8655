"""Alpha learning: from finished tasks of one type, the alpha whose composite best ranks what the
tasks achieved.

For task i placed with compute score c_i and network score n_i that achieved throughput y_i (any
unit where more is better), the composite of alpha is alpha c_i + (1 - alpha) n_i. The learned alpha
maximises the Spearman rank correlation between composite and achieved throughput, over a grid of
alphas (ties: the alpha closest to the current default). Vectorised: one [grid, tasks] rank matrix.
"""

from __future__ import annotations

import numpy as np


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (0-based) along the last axis of a 2-D array; ties share their mean rank."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    rows, n = x.shape
    order = np.argsort(x, axis=-1, kind="mergesort")
    xs = np.take_along_axis(x, order, axis=-1)
    ranks = np.empty_like(x)
    for r in range(rows):
        # runs of equal values in the sorted row get the mean of their positions
        starts = np.flatnonzero(np.r_[True, xs[r, 1:] != xs[r, :-1]])
        ends = np.r_[starts[1:], n]
        mean_pos = (starts + ends - 1) / 2.0
        ranks[r, order[r]] = np.repeat(mean_pos, ends - starts)
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``a`` with ``b`` (NaN when a side is constant)."""
    ra = _ranks(a)
    rb = _ranks(b)[0]
    ra = ra - ra.mean(axis=1, keepdims=True)
    rb = rb - rb.mean()
    den = np.sqrt((ra**2).sum(axis=1) * (rb**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra @ rb) / den, np.nan)


def learn_alpha(compute: np.ndarray, network: np.ndarray, achieved: np.ndarray, default: float = 0.5,
                grid_step: float = 0.01) -> tuple[float, float]:
    """(alpha, its rank correlation) for tasks of one type; ``default`` when nothing is learnable."""
    c = np.asarray(compute, dtype=np.float64)
    n = np.asarray(network, dtype=np.float64)
    y = np.asarray(achieved, dtype=np.float64)
    ok = np.isfinite(c) & np.isfinite(n) & np.isfinite(y)
    c, n, y = c[ok], n[ok], y[ok]
    if y.size < 3:
        return default, float("nan")
    grid = np.round(np.arange(0.0, 1.0 + grid_step / 2, grid_step), 10)
    composite = grid[:, None] * c[None, :] + (1 - grid[:, None]) * n[None, :]
    rho = spearman(composite, y)
    if not np.isfinite(rho).any():
        return default, float("nan")
    best = np.nanmax(rho)
    candidates = grid[np.isclose(rho, best, rtol=0, atol=1e-12)]
    alpha = float(candidates[np.argmin(np.abs(candidates - default))])
    return alpha, float(best)
