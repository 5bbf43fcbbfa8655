"""Times and durations as an operator reads them: UTC clock times, ages like ``3m12s``, and which
columns of a query hold epoch seconds."""

from __future__ import annotations

import datetime
import math

EPOCH_LOW, EPOCH_HIGH = 946_684_800.0, 4_102_444_800.0  # 2000-01-01 .. 2100-01-01: taken as a time
TIME_COLUMNS = ("_at", "_start", "_end", "ts", "time", "first_seen", "last_seen", "deferrable_until")


def when(t: float | None) -> str:
    """``2026-12-01 15:04:05Z`` (UTC), '-' for none."""
    if t is None or not math.isfinite(t):
        return "-"
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def span(seconds: float | None) -> str:
    """``45s``, ``3m12s``, ``2h05m``, ``3d04h``; '-' for none."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def is_time_column(name: str, values: list) -> bool:
    """A column of epoch seconds: named like one (``decided_at``, ``window_end``, ``ts``...) and every
    value a number between 2000 and 2100 (or missing)."""
    low = name.lower()
    if not (low.endswith(TIME_COLUMNS) or low in TIME_COLUMNS):
        return False
    nums = [v for v in values if v is not None]
    return bool(nums) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                              and EPOCH_LOW <= v <= EPOCH_HIGH for v in nums)


def named(ids: list[str], few: int = 3) -> str:
    """A few names, then a count: ``a, b, c and 7 more``."""
    return ", ".join(ids[:few]) + (f" and {len(ids) - few} more" if len(ids) > few else "")


def rejections(decision: dict) -> str:
    """A decision's rejected nodes by reason, a few named, largest group first: ``2 insufficient_cards
    (a, b); 1 down (c)`` (the counts alone where the decision names no node)."""
    by: dict[str, list[str]] = {}
    for node, reason in (decision.get("rejected") or {}).items():
        by.setdefault(reason, []).append(node)
    if by:
        return "; ".join(f"{len(ns)} {r} ({named(sorted(ns))})" for r, ns in sorted(by.items(), key=lambda x: -len(x[1])))
    return ", ".join(f"{k} x{v}" for k, v in (decision.get("rejected_counts") or {}).items())
