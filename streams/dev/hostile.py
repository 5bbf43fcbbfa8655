"""Hostile messages for `cnsched fuzz`: what a broken or malicious producer could put on each input
topic, every one of them a message the worker must dead-letter (and never die on).

``hostile(rng, now, n)`` yields ``(topic, key, value, kind)`` for n messages over probe.samples,
compute.nodes, sched.tasks and sched.events. A generated probe message that our own validation would
accept in full (a random corruption can land on valid bytes) is replaced, so every probe message sent
has at least one row to reject — the fuzz run can then demand a dead letter for each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

from schemas.probe import DecodeError, decode_samples, encode_arrow
from schemas.probe_validation import validate_batch
from schemas.topics import COMPUTE_NODES, PROBE_SAMPLES, SCHED_EVENTS, SCHED_TASKS

HOSTILE_SRC = "fz-h"  # hostile samples never share a series with the valid ones


def _json(doc) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def _sample(now: float, **over) -> dict:
    return {"ts": now, "src": HOSTILE_SRC, "dst": "fz-x", "metric": "rtt_ms", "value": 1.0, **over}


def _arrow_corrupted(rng: np.random.Generator, now: float) -> bytes:
    """An Arrow message with bytes overwritten. Its timestamps lie inside what the worker accepts and
    all its rows but the last are valid, so what still decodes reaches the windowing code (under the
    hostile series); the last row (a negative RTT) makes sure each message has a row to dead-letter.
    They are an hour old, before the valid series' samples (streams/dev/fuzz.py: the last 260 s), so
    they never move a partition's event time past a valid sample still to come."""
    n = int(rng.integers(2, 60))
    values = rng.random(n)
    values[-1] = -1.0
    msg = bytearray(encode_arrow(now - 3600 + 0.5 * np.arange(n), [HOSTILE_SRC] * n, ["fz-x"] * n,
                                 ["rtt_ms"] * n, values))
    for _ in range(int(rng.integers(1, 9))):
        msg[int(rng.integers(0, len(msg)))] = int(rng.integers(0, 256))
    return bytes(msg)


def _probe(rng: np.random.Generator, now: float, max_bytes: int) -> tuple[bytes, str]:
    kind = int(rng.integers(0, 11))
    if kind == 0:
        return rng.bytes(int(rng.integers(1, 2000))), "random_bytes"
    if kind == 1:
        full = _json([_sample(now) for _ in range(5)])
        return full[: int(rng.integers(1, len(full) - 1))], "truncated_json"
    if kind == 2:
        depth = int(rng.integers(1_000, 100_000))
        return b"[" * depth + b"]" * depth, "deep_json"
    if kind == 3:
        big = "9" * int(rng.integers(4_400, 20_000))
        return f'{{"ts": {now}, "src": "fz-h", "metric": "rtt_ms", "value": {big}}}'.encode(), "huge_int"
    if kind == 4:
        v = [1e300, -1e300, 1e308, float("inf"), float("nan"), -1.0, 3.7e6][int(rng.integers(0, 7))]
        metric = "loss_rate" if np.isnan(v) else ["rtt_ms", "gpu_temp_c"][int(rng.integers(0, 2))]
        return _json([_sample(now, value=v, metric=metric)] * int(rng.integers(1, 2000))), "huge_value"
    if kind == 5:
        return _arrow_corrupted(rng, now), "arrow_corrupted"
    if kind == 6:
        bad = ["fz\x1fh", "x" * 200, "", "-lead", "spa ce", "ünï", "a/b"][int(rng.integers(0, 7))]
        field = ["src", "dst", "metric"][int(rng.integers(0, 3))]
        return _json([_sample(now, **{field: bad})]), "hostile_id"
    if kind == 7:
        # ahead by more than any campaign lasts: the campaign's clock is its start, and a sample half an hour
        # ahead read 10 minutes later is still ahead (one 290 s ahead became present in a 100,000-message run
        # whose worker read it 7 minutes on: accepted, it closed valid windows early). The 10 s skew limit
        # itself is pinned in tests/streams/worker/test_windowing.py.
        ts = [now + 23 * 3600, now + 3600, now + 1800, now - 30 * 86_400, -1.0, 1e300][int(rng.integers(0, 6))]
        return _json([_sample(now, ts=ts)]), "far_timestamp"
    if kind == 8:
        n = max_bytes // 60 + 100
        return _json([_sample(now)] * n), "oversized"
    if kind == 9:
        return _json([{"ts": "now", "src": 1, "metric": None}, 42, "x", None]), "wrong_types"
    return b"\x00" * int(rng.integers(1, 64)), "nul_bytes"


def _probe_checked(rng, now, max_bytes, max_skew_s, max_age_s) -> tuple[bytes, str]:
    while True:
        value, kind = _probe(rng, now, max_bytes)
        if kind == "oversized":
            return value, kind
        try:
            check = validate_batch(decode_samples(value), now, max_skew_s, max_age_s)
        except DecodeError:
            return value, kind
        if check.rejected:
            return value, kind


def _report(rng: np.random.Generator, now: float) -> tuple[bytes, str]:
    base = {"node": "fz-n1", "ts": now, "cards": 8}
    cases = [
        ({**base, "free": {"cards": 10**30}}, "huge_int"), ({**base, "cards": -1}, "negative"),
        ({**base, "node": "fz\x1fn"}, "hostile_id"), ({**base, "availability": 2}, "out_of_range"),
        ({**base, "mem_gb": "lots"}, "wrong_types"), ({**base, "benchmarks": [{"name": "x"}] * 300}, "too_many"),
        ({**base, "ts": -5}, "far_timestamp"),
    ]
    k = int(rng.integers(0, len(cases) + 2))
    if k == len(cases):
        return b"[" * 50_000 + b"]" * 50_000, "deep_json"
    if k == len(cases) + 1:
        return rng.bytes(int(rng.integers(1, 500))), "random_bytes"
    doc, kind = cases[k]
    return _json(doc), kind


def _task(rng: np.random.Generator, now: float) -> tuple[bytes, str]:
    cases = [
        ({"id": "fz\x1ft", "type": "inference"}, "hostile_id"),
        ({"id": "fz-t", "type": "inference", "resources": {"cards": 10**30}}, "huge_int"),
        ({"id": "fz-t", "type": "inference", "peers": 0}, "out_of_range"),
        ({"id": "fz-t", "type": "no-such-type"}, "wrong_types"),
        ({"id": "fz-t", "type": "inference", "team": "t" * 1000}, "too_long"),
        ({"id": "fz-t", "type": "inference", "expected_duration_s": float("inf")}, "huge_value"),
    ]
    k = int(rng.integers(0, len(cases) + 1))
    if k == len(cases):
        return b"{" * 10 + rng.bytes(int(rng.integers(1, 200))), "random_bytes"
    doc, kind = cases[k]
    return _json(doc), kind


def _event(rng: np.random.Generator, now: float, i: int) -> tuple[bytes, str]:
    k = int(rng.integers(0, 4))
    if k == 0:  # well formed, about no task anyone submitted
        return _json({"task_id": f"fz-unknown-{i}", "event": "finished", "at": now}), "unknown_task"
    if k == 1:
        return _json({"task_id": "fz-t", "event": "exploded", "at": now}), "wrong_types"
    if k == 2:
        return _json({"task_id": "fz-t", "event": "started", "at": now, "nodes": ["x\x1f"] * 3}), "hostile_id"
    return _json({"task_id": "fz-t", "event": "checkpoint", "at": 10**400}), "huge_int"


def hostile(rng: np.random.Generator, now: float, n: int, max_bytes: int, max_skew_s: float,
            max_age_s: float) -> Iterator[tuple[str, bytes, bytes, str]]:
    """(topic, key, value, kind): 70 % probe messages, 10 % each for reports, tasks and events."""
    for i in range(n):
        r = rng.random()
        key = f"fz-{i % 16}".encode()
        if r < 0.7:
            value, kind = _probe_checked(rng, now, max_bytes, max_skew_s, max_age_s)
            yield PROBE_SAMPLES, key, value, kind
        elif r < 0.8:
            yield (COMPUTE_NODES, key, *_report(rng, now))
        elif r < 0.9:
            yield (SCHED_TASKS, key, *_task(rng, now))
        else:
            yield (SCHED_EVENTS, key, *_event(rng, now, i))
