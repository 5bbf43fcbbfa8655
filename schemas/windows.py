"""Window results on `netstate.windows`: statistics after outlier removal, bounds in epoch seconds."""

from __future__ import annotations

import json
import math

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


def encode_window(result: dict) -> bytes:
    """One window result as a JSON object; NaN (nothing kept) becomes null."""
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()}
    return json.dumps(clean, separators=(",", ":")).encode()


def window_key(result: dict) -> bytes:
    """Message key: the series, so one series' windows stay in order on one partition."""
    return f"{result['src']}|{result['dst']}|{result['metric']}".encode()
