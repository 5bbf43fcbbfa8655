"""Validation of decoded probe samples (schemas.probe.ProbeBatch): every row checked at once, the
good rows kept, and for each rejected one the reason (REASON_SCHEMA / REASON_OUT_OF_RANGE) and why."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schemas.probe import (
    FRACTION_METRICS,
    MAX_LISTED,
    NON_NEGATIVE_METRICS,
    REASON_OUT_OF_RANGE,
    REASON_SCHEMA,
    RTT_MS,
    ProbeBatch,
    RowError,
)


@dataclass
class Validation:
    """What validate_batch found: the good rows, exact counts per reason, the first rows listed."""

    good: ProbeBatch
    rejected: dict[str, int]
    listed: list[RowError]

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def validate_batch(batch: ProbeBatch, now_s: float, max_skew_s: float) -> Validation:
    """Check every row at once; return the good rows and, for the bad ones, why.

    Rules: ``ts`` finite and within ``max_skew_s`` of ``now_s``; ``src`` non-empty; ``metric``
    non-empty; ``rtt_ms`` >= 0 or null (a lost probe); ``loss_rate``, ``bw_util``, ``retrans_rate``
    in [0, 1]; ``bw_gbps`` and ``power_mw`` >= 0; other metrics finite. Only ``rtt_ms`` may be null.
    Row numbers in the listed errors are positions in the original message.
    """
    n = len(batch)
    reason = np.zeros(n, dtype=np.int8)  # 0 ok, 1 schema, 2 out of range
    detail = np.full(n, -1, dtype=np.int8)
    if batch.broken:
        rows = np.fromiter(batch.broken, dtype=np.int64, count=len(batch.broken))
        reason[rows] = 1
    if n:
        ts_ok = np.isfinite(batch.ts) & (np.abs(batch.ts - now_s) <= max_skew_s)
        _flag(reason, detail, ~ts_ok, 2, 0)
        empty_src = np.array([x == "" for x in batch.src_names], dtype=bool)
        if empty_src.any():
            _flag(reason, detail, empty_src[batch.src], 1, 1)
        # one rule per metric name, looked up per row
        names = batch.metric_names
        rule = np.array([_metric_rule(m) for m in names], dtype=np.int8)[batch.metric]
        v = batch.value
        finite = np.isfinite(v)
        _flag(reason, detail, rule == _RULE_EMPTY, 1, 2)
        _flag(reason, detail, (rule != _RULE_RTT) & ~finite, 2, 3)
        _flag(reason, detail, (rule == _RULE_RTT) & np.isinf(v), 2, 3)
        _flag(reason, detail, (rule == _RULE_FRACTION) & ((v < 0) | (v > 1)), 2, 4)
        _flag(reason, detail, ((rule == _RULE_RTT) | (rule == _RULE_NON_NEGATIVE)) & (v < 0), 2, 5)
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
            )
        listed.append(RowError(int(i), r, text))
    n_schema = int((reason == 1).sum())
    n_range = int((reason == 2).sum())
    rejected = {k: c for k, c in ((REASON_SCHEMA, n_schema), (REASON_OUT_OF_RANGE, n_range)) if c}
    return Validation(batch.take(~bad), rejected, listed)


_RULE_GENERIC, _RULE_RTT, _RULE_FRACTION, _RULE_NON_NEGATIVE, _RULE_EMPTY = range(5)


def _metric_rule(name: str) -> int:
    if name == "":
        return _RULE_EMPTY
    if name == RTT_MS:
        return _RULE_RTT
    if name in FRACTION_METRICS:
        return _RULE_FRACTION
    if name in NON_NEGATIVE_METRICS:
        return _RULE_NON_NEGATIVE
    return _RULE_GENERIC


_DETAILS = (
    "ts {ts!r} is not finite epoch seconds within the allowed clock skew",
    "src must not be empty",
    "metric must not be empty",
    "value of {metric} must be finite (only rtt_ms may be null: a lost probe)",
    "{metric} must be in [0, 1], got {value!r}",
    "{metric} must be >= 0, got {value!r}",
)


def _flag(reason: np.ndarray, detail: np.ndarray, mask: np.ndarray, r: int, d: int) -> None:
    """Record the first failing rule of each row."""
    if not mask.any():
        return
    fresh = mask & (reason == 0)
    reason[fresh] = r
    detail[fresh] = d
