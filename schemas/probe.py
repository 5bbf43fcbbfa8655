"""Probe samples on `probe.samples`: the contract, and the codecs for its three encodings.

One message is one of
1. a JSON object ``{"ts": 1732860000.123, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": 0.42}``,
2. a JSON array of such objects,
3. an Arrow IPC stream with columns ``ts`` (float64 epoch seconds), ``src``, ``dst`` (string,
   dictionary ok), ``metric`` (string) and ``value`` (float64).

Whatever the encoding, :func:`decode_samples` returns a :class:`ProbeBatch`: numpy columns with the
strings dictionary-encoded (codes + a small list of names), so the Arrow path creates no Python object
per sample. schemas.probe_validation.validate_batch then checks every row at once and says, per rejected row, why.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

RTT_MS = "rtt_ms"
LOSS_RATE = "loss_rate"
BW_UTIL = "bw_util"
RETRANS_RATE = "retrans_rate"
BW_GBPS = "bw_gbps"
POWER_MW = "power_mw"
FRACTION_METRICS = frozenset({LOSS_RATE, BW_UTIL, RETRANS_RATE})
NON_NEGATIVE_METRICS = frozenset({RTT_MS, BW_GBPS, POWER_MW})

# Dead-letter reasons (also the label of the per-reason counters on /metrics).
REASON_UNDECODABLE = "undecodable"
REASON_SCHEMA = "schema"
REASON_OUT_OF_RANGE = "out_of_range"
REASON_TOO_LARGE = "too_large"
REASON_INTERNAL = "internal_error"  # an input the code did not foresee: the message goes, the worker stays

class DecodeError(ValueError):
    """The message as a whole cannot be read: nothing in it is usable."""


@dataclass
class RowError:
    row: int
    reason: str  # one of the REASON_* constants
    detail: str

    def as_dict(self) -> dict:
        return {"row": self.row, "reason": self.reason, "detail": self.detail}


@dataclass
class ProbeBatch:
    """Columns of one decoded message. Strings are dictionary-encoded: ``src_names[src[i]]``."""

    ts: np.ndarray  # float64
    value: np.ndarray  # float64, NaN where null
    src: np.ndarray  # int32 codes into src_names
    dst: np.ndarray  # int32 codes into dst_names
    metric: np.ndarray  # int32 codes into metric_names
    src_names: list[str]
    dst_names: list[str]
    metric_names: list[str]
    # Rows that could not be read (a missing field, a wrong type): kept in place so that row
    # numbers match the message, rejected by validate_batch with the detail given here.
    broken: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def take(self, mask: np.ndarray) -> ProbeBatch:
        """The rows where ``mask`` is true (names are kept; codes stay valid)."""
        return ProbeBatch(
            self.ts[mask],
            self.value[mask],
            self.src[mask],
            self.dst[mask],
            self.metric[mask],
            self.src_names,
            self.dst_names,
            self.metric_names,
        )

    def rows(self) -> list[dict]:
        """Plain dicts, for tools and tests (slow path: one object per row)."""
        return [
            {
                "ts": float(self.ts[i]),
                "src": self.src_names[self.src[i]],
                "dst": self.dst_names[self.dst[i]],
                "metric": self.metric_names[self.metric[i]],
                "value": None if math.isnan(self.value[i]) else float(self.value[i]),
            }
            for i in range(len(self))
        ]


MAX_LISTED = 100  # rejected rows listed per dead letter; the counts are always exact


def empty_batch() -> ProbeBatch:
    z = np.zeros(0, dtype=np.int32)
    return ProbeBatch(np.zeros(0), np.zeros(0), z, z.copy(), z.copy(), [], [], [])


# --------------------------------------------------------------------------------------- encode


def encode_arrow(
    ts: np.ndarray | list, src, dst, metric, value: np.ndarray | list
) -> bytes:
    """Serialise columns as one Arrow IPC stream message (the fast wire format)."""
    table = pa.table(
        {
            "ts": pa.array(np.asarray(ts, dtype=np.float64)),
            "src": pa.array(src, type=pa.string()).dictionary_encode(),
            "dst": pa.array(dst, type=pa.string()).dictionary_encode(),
            "metric": pa.array(metric, type=pa.string()).dictionary_encode(),
            "value": pa.array(np.asarray(value, dtype=np.float64), from_pandas=True),
        }
    )
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


# --------------------------------------------------------------------------------------- decode


def decode_samples(payload: bytes) -> ProbeBatch:
    """Detect the encoding of one message and decode it to columns.

    Raises :class:`DecodeError` when nothing in the message is readable. Rows with a structural
    problem (a missing field, a wrong type) are dropped and listed in ``batch.errors``.
    """
    if not payload:
        raise DecodeError("empty message")
    head = payload[:64].lstrip()
    if head[:1] in (b"{", b"["):
        return _decode_json(payload)
    return _decode_arrow(payload)


def _decode_arrow(payload: bytes) -> ProbeBatch:
    try:
        batches = list(ipc.open_stream(payload))
        for rb in batches:  # offsets, dictionary codes, UTF-8: a corrupted batch must not reach memory access
            rb.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        raise DecodeError(f"neither JSON nor an Arrow IPC stream: {exc}") from None
    if not batches:
        raise DecodeError("Arrow stream holds no record batch")
    try:
        if len(batches) == 1:
            rb = batches[0]
        else:
            table = pa.Table.from_batches(batches).unify_dictionaries().combine_chunks()
            rb = table.to_batches()[0] if table.num_rows else batches[0].slice(0, 0)
        names = rb.schema.names
    except (pa.ArrowException, UnicodeDecodeError) as exc:  # batches that disagree; names not UTF-8
        raise DecodeError(f"unusable Arrow stream: {exc}") from None
    missing = [c for c in ("ts", "src", "metric", "value") if c not in names]
    if missing:
        raise DecodeError(f"Arrow stream lacks column(s) {', '.join(missing)}")
    twice = sorted({c for c in ("ts", "src", "dst", "metric", "value") if names.count(c) > 1})
    if twice:  # which of them is meant cannot be told
        raise DecodeError(f"Arrow stream has column(s) {', '.join(twice)} more than once")
    n = rb.num_rows
    try:
        ts = _float_column(rb.column("ts"))
        value = _float_column(rb.column("value"))
        src, src_names = _string_codes(rb.column("src"))
        if "dst" in names:
            dst, dst_names = _string_codes(rb.column("dst"))
        else:
            dst, dst_names = np.zeros(n, dtype=np.int32), [""]
        metric, metric_names = _string_codes(rb.column("metric"))
    except (pa.ArrowException, TypeError, UnicodeDecodeError) as exc:
        raise DecodeError(f"Arrow column of the wrong type: {exc}") from None
    batch = ProbeBatch(ts, value, src, dst, metric, src_names, dst_names, metric_names)
    for name in ("ts", "src", "metric"):
        col = rb.column(name)
        if col.null_count:
            for i in np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)):
                batch.broken.setdefault(int(i), f"{name} is null")
    return batch


def _float_column(col: pa.Array) -> np.ndarray:
    if col.type != pa.float64():
        col = col.cast(pa.float64())
    if col.null_count:
        col = col.fill_null(np.nan)
    return np.ascontiguousarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def _string_codes(col: pa.Array) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes and names of a string column, vectorised (no object per row)."""
    if not pa.types.is_dictionary(col.type):
        col = col.cast(pa.string()).dictionary_encode()
    indices = col.indices
    if indices.null_count:
        indices = indices.fill_null(0)
    names = col.dictionary
    if names.type != pa.string():
        names = names.cast(pa.string())
    names = names.to_pylist()
    if not names:
        names = [""]
    codes = np.ascontiguousarray(indices.to_numpy(zero_copy_only=False), dtype=np.int32)
    return codes, [x if x is not None else "" for x in names]


def _decode_json(payload: bytes) -> ProbeBatch:
    try:
        doc = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: also ints over 4,300 digits
        raise DecodeError(f"invalid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list):
        raise DecodeError("JSON message must be an object or an array of objects")
    ts: list[float] = []
    value: list[float] = []
    src: list[str] = []
    dst: list[str] = []
    metric: list[str] = []
    broken: dict[int, str] = {}
    for i, obj in enumerate(doc):
        problem = _json_row_problem(obj)
        if problem:
            broken[i] = problem
            obj = _PLACEHOLDER
        v = obj.get("value")
        ts.append(float(obj["ts"]))
        value.append(math.nan if v is None else float(v))
        src.append(obj["src"])
        dst.append(obj.get("dst") or "")
        metric.append(obj["metric"])
    src_c, src_n = _codes(src)
    dst_c, dst_n = _codes(dst)
    met_c, met_n = _codes(metric)
    return ProbeBatch(
        np.asarray(ts, dtype=np.float64),
        np.asarray(value, dtype=np.float64),
        src_c,
        dst_c,
        met_c,
        src_n,
        dst_n,
        met_n,
        broken,
    )


_PLACEHOLDER = {"ts": math.nan, "src": "", "dst": "", "metric": "", "value": None}


def _json_row_problem(obj) -> str | None:
    if not isinstance(obj, dict):
        return "sample must be a JSON object"
    missing = [k for k in ("ts", "src", "metric", "value") if k not in obj]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    if isinstance(obj["ts"], bool) or not isinstance(obj["ts"], (int, float)):
        return "ts must be a number (epoch seconds)"
    if not isinstance(obj["src"], str):
        return "src must be a string"
    if obj.get("dst") is not None and not isinstance(obj["dst"], str):
        return "dst must be a string"
    if not isinstance(obj["metric"], str):
        return "metric must be a string"
    v = obj["value"]
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        return "value must be a number or null"
    for k in ("ts", "value"):  # an int beyond float64 would raise OverflowError further on
        if isinstance(obj[k], int) and not -1e308 < obj[k] < 1e308:
            return f"{k} out of range"
    return None


def _codes(values: list[str]) -> tuple[np.ndarray, list[str]]:
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(v, len(index)) for v in values), dtype=np.int32, count=len(values)
    )
    return codes, list(index) or [""]


def concat_batches(batches: list[ProbeBatch]) -> ProbeBatch:
    """One batch from many (their string dictionaries unified; rows in order)."""
    live = [b for b in batches if len(b)]
    if not live:
        return empty_batch()
    if len(live) == 1:
        return live[0]
    cols = {}
    for field_ in ("src", "dst", "metric"):
        names: dict[str, int] = {}
        parts = []
        for b in live:
            lut = np.fromiter(
                (names.setdefault(x, len(names)) for x in getattr(b, f"{field_}_names")),
                dtype=np.int32,
            )
            parts.append(lut[getattr(b, field_)])
        cols[field_] = (np.concatenate(parts), list(names))
    return ProbeBatch(
        np.concatenate([b.ts for b in live]),
        np.concatenate([b.value for b in live]),
        cols["src"][0], cols["dst"][0], cols["metric"][0],
        cols["src"][1], cols["dst"][1], cols["metric"][1],
    )
