"""Numpy's RuntimeWarnings for all-NaN slices (nanmedian, nanquantile of a row with no data) are
expected where rows may be empty: the result is NaN, which callers handle."""

from __future__ import annotations

import contextlib
import warnings


@contextlib.contextmanager
def quiet_nan_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
