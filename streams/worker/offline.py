"""`cnsched stats`: the ingest code path offline, for captured probe data.

Input (stdin or a file): a JSON array of samples, JSON lines (one object or array per line), or an
Arrow IPC stream. Output: the window results, with the field names of netstate.windows. The clock
skew check is off (captured data is old); everything else — validation, sketches, Hampel, event-time
windows with the allowed lateness — is what the worker does.
"""

from __future__ import annotations

import math

from schemas.probe import DecodeError, decode_samples
from schemas.probe_validation import validate_batch
from streams.worker.windowing import PartitionWindows


class InputError(ValueError):
    """The input cannot be read as probe samples."""


def split_input(data: bytes) -> list[bytes]:
    """Messages in the input: the Arrow stream or JSON document as one, or one per JSON line."""
    head = data.lstrip()[:1]
    if head not in (b"{", b"["):
        return [data]  # Arrow IPC (decode says if it is not)
    try:
        import json

        json.loads(data)
        return [data]
    except ValueError:
        lines = [ln for ln in data.splitlines() if ln.strip()]
        return [b"[" + b",".join(lines) + b"]"] if all(ln.lstrip()[:1] == b"{" for ln in lines) else lines


def window_stats_offline(
    data: bytes, size_s: int, step_s: int, lateness_s: float, hampel_k: float = 3.0
) -> tuple[list[dict], dict[str, int]]:
    """Window results of captured samples, and counts of rejected and late samples."""
    w = PartitionWindows(size_s, step_s, lateness_s, hampel_k)
    results: list[dict] = []
    counts = {"samples": 0, "rejected": 0, "late": 0}
    for i, payload in enumerate(split_input(data)):
        try:
            batch = decode_samples(payload)
        except DecodeError as exc:
            raise InputError(f"message {i + 1}: {exc}") from None
        check = validate_batch(batch, 0.0, math.inf)
        counts["samples"] += len(batch)
        counts["rejected"] += check.rejected_total
        counts["late"] += w.add(check.good)
        results += w.close_ready()
    results += w.flush_all()
    return results, counts
