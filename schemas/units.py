"""Durations as operators write them: ``100ms``, ``30s``, ``1min``/``1m``, ``2h``, ``1d``; a bare number
is seconds."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0, "d": 86400.0,
          "day": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*$")


def divides_day(seconds: float) -> bool:
    """True when a whole number of ``seconds`` steps makes a day (so daily rhythms line up)."""
    per_day = 86_400 / seconds
    return per_day >= 1 and abs(per_day - round(per_day)) < 1e-9


def parse_duration(text: str, unit_required: bool = False) -> float:
    """Seconds in ``text``; ValueError (saying what is accepted) when malformed, zero or negative, or
    (``unit_required``) a bare number, which readers take differently (Slurm: minutes; we: seconds)."""
    m = _DURATION.match(str(text).lower())
    unit = m.group(2) if m else None
    if m and not unit and unit_required:
        raise ValueError(f"{text!r} has no unit: write {m.group(1)}s, {m.group(1)}min or {m.group(1)}h "
                         "(a bare number is seconds here and minutes to Slurm)")
    if unit in ("secs", "mins", "hours", "days"):
        unit = unit[:-1]
    if not m or (unit and unit not in _UNITS):
        raise ValueError(f"{text!r} is not a duration: use a number with ms, s, min (or m), h or d, e.g. 1min")
    seconds = float(m.group(1)) * (_UNITS[unit] if unit else 1.0)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be greater than zero")
    return seconds
