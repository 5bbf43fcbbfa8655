"""Student-t confidence intervals of a mean (95 %), for results over seeds: with ten seeds a
bootstrap over seeds returns little more than their range; a t-interval says how far the mean of
another ten could fall.

The two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom are the standard table's;
beyond 30 the Cornish-Fisher expansion around the normal quantile (error below 1e-4 there).
"""

from __future__ import annotations

import math

import numpy as np

_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788,
         2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
         2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054


def t975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2) \
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)


def t_interval(x) -> tuple[float, float, float]:
    """(mean, low, high) of the 95 % t-interval of the mean of ``x`` (NaNs left out); with fewer than
    two values the bounds are NaN (no interval from one value), with none all three are."""
    a = np.asarray(x, np.float64)
    a = a[~np.isnan(a)]
    if a.size == 0:
        return math.nan, math.nan, math.nan
    m = float(a.mean())
    if a.size < 2:
        return m, math.nan, math.nan
    half = t975(a.size - 1) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return m, m - half, m + half
