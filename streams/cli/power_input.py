"""Power values for `cnsched battery`: given as arguments, or CSV text from a file or stdin."""

from __future__ import annotations

import csv
import io

import numpy as np

from core.battery import BatteryInputError


def parse_values(items: list[str]) -> np.ndarray:
    """Power values given as arguments."""
    out = []
    for i, s in enumerate(items, start=1):
        try:
            out.append(float(s))
        except ValueError:
            raise BatteryInputError(f"value {i} ({s!r}) is not a number (nor a file)") from None
    return np.array(out)


def read_csv(text: str, column: str | None = None) -> np.ndarray:
    """Power values from CSV text: with a header, the column ``column`` (default `power_mw`, else
    the last column); without one, the last column of every row. Blank lines and lines starting
    with '#' are skipped."""
    rows = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text)), start=1)
            if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
    if not rows:
        raise BatteryInputError("no values in the input")
    first = [c.strip() for c in rows[0][1]]
    idx = -1
    if not _is_number(first[-1]) or (column is not None):
        header = first
        if column is not None and column not in header:
            raise BatteryInputError(f"no column {column!r} in the header ({', '.join(header)})")
        name = column or ("power_mw" if "power_mw" in header else header[-1])
        idx = header.index(name)
        rows = rows[1:]
    values = []
    for n, r in rows:
        cell = r[idx].strip() if -len(r) <= idx < len(r) else ""
        try:
            values.append(float(cell))
        except ValueError:
            raise BatteryInputError(f"line {n}: {cell!r} is not a number") from None
    return np.array(values)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False
