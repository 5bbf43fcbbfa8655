"""Python's ``round(x, places)`` of many floats at once, compiled: the figures a decision lists (its
candidates' scores, rounded to 4 places) are the same however they are gathered, without a Python
call per value.

Python rounds the exact binary value of ``x`` to ``places`` decimals (half to even) and returns the
double nearest that decimal. Here: ``p = x * 10**places`` in floating point, ``n = rint(p)``, and
``n / 10**places`` — a correctly rounded division of an exact integer, so the double nearest
``n / 10**places``, Python's answer whenever ``n`` is the integer Python rounds to. It can differ only
where the exact product lies within the product's rounding error of a half (``p`` within an ulp of
``k + 0.5``) or where ``p`` is too large for its integer part to be exact: those values, and NaN and
infinities, are rounded by Python itself. :func:`round_places_reference` is Python's round of each; the
tests hold the two together, near halves included.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_EXACT = 2.0 ** 50  # |p| below this: rint(p) is exact and an ulp of p is below 2**-2


def round_places(values: np.ndarray, places: int = 4) -> np.ndarray:
    """float64[...]: ``round(v, places)`` of each value, as Python rounds it (see the module)."""
    a = np.asarray(values, np.float64)
    out, unsure = _round_places(a.ravel(), float(10.0 ** places))
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(float(a.flat[i]), places)
    return out.reshape(a.shape)


@nb.njit(cache=True)
def _round_places(a, scale):  # pragma: no cover - compiled (tested against the reference)
    out = np.empty(a.size)
    unsure = np.zeros(a.size, np.bool_)
    for i in range(a.size):
        out[i], unsure[i] = round_one(a[i], scale)
    return out, unsure


@nb.njit(cache=True, inline="always")
def round_one(x, scale):  # pragma: no cover - compiled
    """(``x`` rounded to ``scale = 10**places``, whether Python's round must do it instead): NaN,
    infinite or too large, or within the product's rounding error of a half (core.listing shares it)."""
    p = x * scale
    if not abs(p) < _EXACT:
        return x + 0.0, True
    n = np.rint(p)
    return n / scale, abs(abs(p - n) - 0.5) <= abs(p) * 2.0 ** -50 + 1e-300


def round_places_reference(values: np.ndarray, places: int = 4) -> np.ndarray:
    """Python's ``round(v, places)`` of each value."""
    a = np.asarray(values, np.float64)
    return np.array([round(float(v), places) for v in a.ravel().tolist()], np.float64).reshape(a.shape)
