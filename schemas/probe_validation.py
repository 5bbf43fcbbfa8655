"""Validation of decoded probe samples (schemas.probe.ProbeBatch): every row checked at once, the
good rows kept, and for each rejected one the reason (REASON_SCHEMA / REASON_OUT_OF_RANGE) and why."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from schemas.compute import NODE_ID_PATTERN
from schemas.probe import (
    BW_GBPS,
    FRACTION_METRICS,
    MAX_LISTED,
    NON_NEGATIVE_METRICS,
    POWER_MW,
    REASON_OUT_OF_RANGE,
    REASON_SCHEMA,
    RTT_MS,
    ProbeBatch,
    RowError,
)

METRIC_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
# Largest magnitude a sample may have: far above anything physical, low enough that a series'
# sketch keys (and so its memory) stay bounded whatever a producer sends.
MAX_ABS_VALUE = {RTT_MS: 3.6e6, BW_GBPS: 1e6, POWER_MW: 1e9}
MAX_ABS_GENERIC = 1e12
_ID = re.compile(NODE_ID_PATTERN)
_ID_SHOWN = NODE_ID_PATTERN.replace("{", "{{").replace("}", "}}")  # the details below are format strings
_METRIC = re.compile(METRIC_PATTERN)


@dataclass
class Validation:
    """What validate_batch found: the good rows, exact counts per reason, the first rows listed."""

    good: ProbeBatch
    rejected: dict[str, int]
    listed: list[RowError]

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def validate_batch(batch: ProbeBatch, now_s: float, max_ahead_s: float, max_age_s: float | None = None) -> Validation:
    """Check every row at once; return the good rows and, for the bad ones, why.

    Rules: ``ts`` finite, at most ``max_ahead_s`` after ``now_s`` and at most ``max_age_s`` (default:
    ``max_ahead_s``) before it; ``src`` a node id (NODE_ID_PATTERN), ``dst`` empty or a node id;
    ``metric`` a lower-case name (METRIC_PATTERN); ``rtt_ms`` >= 0 or null (a lost probe);
    ``loss_rate``, ``bw_util``, ``retrans_rate`` in [0, 1]; ``bw_gbps`` and ``power_mw`` >= 0; every
    value finite and within MAX_ABS_VALUE (MAX_ABS_GENERIC for other metrics). Only ``rtt_ms`` may be
    null. Row numbers in the listed errors are positions in the original message.
    """
    max_age_s = max_ahead_s if max_age_s is None else max_age_s
    n = len(batch)
    reason = np.zeros(n, dtype=np.int8)  # 0 ok, 1 schema, 2 out of range
    detail = np.full(n, -1, dtype=np.int8)
    if batch.broken:
        rows = np.fromiter(batch.broken, dtype=np.int64, count=len(batch.broken))
        reason[rows] = 1
    if n:
        ts_ok = np.isfinite(batch.ts) & (batch.ts - now_s <= max_ahead_s) & (now_s - batch.ts <= max_age_s)
        _flag(reason, detail, ~ts_ok, 2, 0)
        bad_src = np.array([_ID.fullmatch(x) is None for x in batch.src_names], dtype=bool)
        if bad_src.any():
            _flag(reason, detail, bad_src[batch.src], 1, 1)
        bad_dst = np.array([x != "" and _ID.fullmatch(x) is None for x in batch.dst_names], dtype=bool)
        if bad_dst.any():
            _flag(reason, detail, bad_dst[batch.dst], 1, 6)
        # one rule per metric name, looked up per row
        names = batch.metric_names
        rule = np.array([_metric_rule(m) for m in names], dtype=np.int8)[batch.metric]
        limit = np.array([MAX_ABS_VALUE.get(m, MAX_ABS_GENERIC) for m in names])[batch.metric]
        v = batch.value
        finite = np.isfinite(v)
        _flag(reason, detail, rule == _RULE_EMPTY, 1, 2)
        _flag(reason, detail, (rule != _RULE_RTT) & ~finite, 2, 3)
        _flag(reason, detail, (rule == _RULE_RTT) & np.isinf(v), 2, 3)
        _flag(reason, detail, (rule == _RULE_FRACTION) & ((v < 0) | (v > 1)), 2, 4)
        _flag(reason, detail, ((rule == _RULE_RTT) | (rule == _RULE_NON_NEGATIVE)) & (v < 0), 2, 5)
        with np.errstate(invalid="ignore"):
            _flag(reason, detail, np.abs(v) > limit, 2, 7)
    bad = reason > 0
    if not bad.any():
        return Validation(batch, {}, [])
    listed = []
    for i in np.flatnonzero(bad)[:MAX_LISTED]:
        r = REASON_SCHEMA if reason[i] == 1 else REASON_OUT_OF_RANGE
        if int(i) in batch.broken:
            text = batch.broken[int(i)]
        else:
            text = _DETAILS[detail[i]].format(
                metric=batch.metric_names[batch.metric[i]],
                value=float(batch.value[i]),
                ts=float(batch.ts[i]),
                limit=MAX_ABS_VALUE.get(batch.metric_names[batch.metric[i]], MAX_ABS_GENERIC),
            )
        listed.append(RowError(int(i), r, text))
    n_schema = int((reason == 1).sum())
    n_range = int((reason == 2).sum())
    rejected = {k: c for k, c in ((REASON_SCHEMA, n_schema), (REASON_OUT_OF_RANGE, n_range)) if c}
    return Validation(batch.take(~bad), rejected, listed)


_RULE_GENERIC, _RULE_RTT, _RULE_FRACTION, _RULE_NON_NEGATIVE, _RULE_EMPTY = range(5)


def _metric_rule(name: str) -> int:
    if _METRIC.fullmatch(name) is None:
        return _RULE_EMPTY
    if name == RTT_MS:
        return _RULE_RTT
    if name in FRACTION_METRICS:
        return _RULE_FRACTION
    if name in NON_NEGATIVE_METRICS:
        return _RULE_NON_NEGATIVE
    return _RULE_GENERIC


_DETAILS = (
    "ts {ts!r} is not finite epoch seconds within the allowed clock skew (too far ahead of the worker's clock or too old)",
    "src must be a node id matching " + _ID_SHOWN,
    "metric must be a name matching " + METRIC_PATTERN.replace("{", "{{").replace("}", "}}"),
    "value of {metric} must be finite (only rtt_ms may be null: a lost probe)",
    "{metric} must be in [0, 1], got {value!r}",
    "{metric} must be >= 0, got {value!r}",
    "dst must be empty or a node id matching " + _ID_SHOWN,
    "|{metric}| must be at most {limit:g}, got {value!r}",
)


def _flag(reason: np.ndarray, detail: np.ndarray, mask: np.ndarray, r: int, d: int) -> None:
    """Record the first failing rule of each row."""
    if not mask.any():
        return
    fresh = mask & (reason == 0)
    reason[fresh] = r
    detail[fresh] = d
