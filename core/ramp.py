"""Power-aware starts: when a job may start so that the power a site adds within any ``window_s``
stays within its ramp limit (pure: numbers and arrays in, numbers out).

A start of ``mw`` at time x counts in every window (t - window_s, t] that holds x. The earliest
start at or after ``requested`` is found among ``requested`` and the moments a booked start leaves
the window (booked + window_s): at a candidate x the starts in (x - window_s, x] plus ``mw`` must stay
within the limit, and so must every window ending at a booked start in (x, x + window_s). A start
larger than the limit by itself is allowed when its window holds nothing else (it ramps alone).

:func:`ramps` measures a power series' steepest rises: the largest increase over any ``window``
consecutive samples.
"""

from __future__ import annotations

import numpy as np


def _load(t: np.ndarray, mw: np.ndarray, end: float, window_s: float) -> float:
    return float(mw[(t > end - window_s) & (t <= end)].sum())


def earliest_start(requested: float, mw: float, booked_t: np.ndarray, booked_mw: np.ndarray, limit: float,
                   window_s: float = 60.0) -> float:
    """The earliest time >= ``requested`` a start of ``mw`` keeps every window within ``limit``."""
    t, m = np.asarray(booked_t, float), np.asarray(booked_mw, float)
    if mw <= 0 or not np.isfinite(limit):
        return requested
    candidates = np.unique(np.concatenate([[requested], t[t + window_s >= requested] + window_s]))
    for x in candidates[candidates >= requested]:
        if mw > limit:  # alone in its window or not at all
            if not np.any((t > x - window_s) & (t < x + window_s)):
                return float(x)
            continue
        ends = np.concatenate([[x], t[(t > x) & (t < x + window_s)]])
        if all(_load(t, m, e, window_s) + mw <= limit + 1e-9 for e in ends):
            return float(x)
    return float(max(t.max() + window_s, requested)) if t.size else requested


def ramps(power: np.ndarray, window: int = 1) -> np.ndarray:
    """float[T]: each sample's rise over the ``window`` samples before it (0 for the first ones)."""
    p = np.asarray(power, float)
    out = np.zeros(p.size)
    if p.size > window:
        out[window:] = p[window:] - p[:-window]
    return out
