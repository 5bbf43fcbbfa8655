"""Window results on `netstate.windows`: statistics after outlier removal, bounds in epoch seconds."""

from __future__ import annotations

import json
import math

import pyarrow as pa
from pydantic import BaseModel, ConfigDict


class WindowResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    src: str
    dst: str
    metric: str
    window_start: float
    window_end: float
    count: int
    kept: int
    outliers: int
    lost: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None


WINDOW_ARROW_SCHEMA = pa.schema(
    [
        pa.field("src", pa.string(), nullable=False),
        pa.field("dst", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("window_start", pa.float64(), nullable=False),
        pa.field("window_end", pa.float64(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("kept", pa.int64(), nullable=False),
        pa.field("outliers", pa.int64(), nullable=False),
        pa.field("lost", pa.int64(), nullable=False),
        pa.field("mean", pa.float64()),
        pa.field("p50", pa.float64()),
        pa.field("p95", pa.float64()),
        pa.field("p99", pa.float64()),
        pa.field("min", pa.float64()),
        pa.field("max", pa.float64()),
    ]
)


def encode_window(result: dict) -> bytes:
    """One window result as a JSON object; NaN (nothing kept) becomes null."""
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()}
    return json.dumps(clean, separators=(",", ":")).encode()


def window_key(result: dict) -> bytes:
    """Message key: the path (src|dst; dst empty for node-local metrics)."""
    return f"{result['src']}|{result['dst']}".encode()
