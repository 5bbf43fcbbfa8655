"""Request parameters of the HTTP API: pure functions from the query (a mapping of strings) to
values, or to an ErrorBody naming every field that is wrong and why (answered as 400)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from core.battery import BatteryInputError
from schemas.api import ErrorBody, FieldError
from schemas.compute import NODE_ID_PATTERN
from schemas.units import divides_day, parse_duration
from sinks.queries import STATS
from streams.analytics.power import window_samples

_ID = re.compile(NODE_ID_PATTERN)
_METRIC = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_HORIZON_STEPS = 10_080


def invalid(fields: list[FieldError]) -> ErrorBody:
    return ErrorBody(error="invalid request", fields=fields)


def check_ids(**ids: str) -> ErrorBody | None:
    """An error for the first id that is not a valid node, site or task id."""
    for name, value in ids.items():
        if not _ID.match(value):
            return invalid([FieldError(field=name, value=value, reason=f"must match {NODE_ID_PATTERN}")])
    return None


def paging(query: Mapping[str, str], limit_max: int) -> tuple[int, int] | ErrorBody:
    """(offset, limit) of a list request."""
    fields, values = [], {}
    for name, default, lo, hi in (("offset", 0, 0, 10**9), ("limit", 100, 1, limit_max)):
        raw = query.get(name, str(default))
        try:
            v = int(raw)
        except ValueError:
            fields.append(FieldError(field=name, value=raw, reason="must be an integer"))
            continue
        if not lo <= v <= hi:
            fields.append(FieldError(field=name, value=raw, reason=f"must be in [{lo}, {hi}]"))
        values[name] = v
    return invalid(fields) if fields else (values["offset"], values["limit"])


def durations(query: Mapping[str, str], fields: list[FieldError], **defaults: str) -> dict[str, float]:
    """The named duration parameters in seconds; a malformed one adds a field error instead."""
    out = {}
    for name, default in defaults.items():
        raw = query.get(name, default)
        try:
            out[name] = parse_duration(raw)
        except ValueError as exc:
            fields.append(FieldError(field=name, value=raw, reason=str(exc)))
    return out


def forecast_query(query: Mapping[str, str], default_step_s: float) -> dict | ErrorBody:
    """{metric, stat, step_s, horizon_steps, history_steps_shown} of a forecast request (``history``:
    how much of the past to answer with, as steps; default none)."""
    fields: list[FieldError] = []
    metric = query.get("metric", "rtt_ms")
    if not _METRIC.fullmatch(metric):
        fields.append(FieldError(field="metric", value=metric, reason="must be a metric name"))
    stat = query.get("stat", "mean")
    if stat not in STATS:
        fields.append(FieldError(field="stat", value=stat, reason=f"must be one of {', '.join(STATS)}"))
    out = durations(query, fields, step=f"{default_step_s:g}s", horizon="60m")
    if "history" in query:
        out.update(durations(query, fields, history=query["history"]))
    if "step" in out and not (out["step"] >= 1 and divides_day(out["step"])):
        fields.append(FieldError(field="step", value=query.get("step"),
                                 reason="must be 1 s to 1 d and divide a day (e.g. 60s, 5min, 1h)"))
        out.pop("step")
    steps = 0.0
    if "step" in out and "horizon" in out:
        steps = out["horizon"] / out["step"]
        if steps < 1 or steps > MAX_HORIZON_STEPS or abs(steps - round(steps)) > 1e-9:
            fields.append(FieldError(field="horizon", value=query.get("horizon", "60m"),
                                     reason=f"must be a whole number (1 to {MAX_HORIZON_STEPS}) of steps"))
    back = 0
    if "step" in out and "history" in out:
        back = int(out["history"] // out["step"])
        if back > MAX_HORIZON_STEPS:
            fields.append(FieldError(field="history", value=query.get("history"),
                                     reason=f"at most {MAX_HORIZON_STEPS} steps"))
    if fields:
        return invalid(fields)
    return {"metric": metric, "stat": stat, "step_s": out["step"], "horizon_steps": int(round(steps)),
            "history_steps_shown": back}


_SIZING_NUMBERS = (("margin", "1.2", lambda v: v > 0, "must be > 0"),
                   ("dod", "0.9", lambda v: 0 < v <= 1, "must be in (0, 1]"),
                   ("ramp_limit", None, lambda v: v > 0, "must be > 0 MW/min"))


MAX_SIZING_SAMPLES = 1_000_000  # the work of one sizing request is bounded by it (a week at 1 s is 604,800)
MAX_SIZING_PERIOD_S = 31 * 86_400


def smoothing_query(query: Mapping[str, str]) -> dict | ErrorBody:
    """{interval, period, window, margin, dod, ramp_limit, trailing} of a battery sizing request."""
    fields: list[FieldError] = []
    out: dict = durations(query, fields, interval="1min", period="1d")
    if out.get("interval", 1.0) < 1.0:
        fields.append(FieldError(field="interval", value=query.get("interval"),
                                 reason="must be at least 1s (the finest window)"))
        out.pop("interval")
    if out.get("period", 0.0) > MAX_SIZING_PERIOD_S:
        fields.append(FieldError(field="period", value=query.get("period"), reason="must be at most 31d"))
        out.pop("period")
    if "interval" in out and "period" in out and out["period"] / out["interval"] > MAX_SIZING_SAMPLES:
        fields.append(FieldError(field="interval", value=query.get("interval"),
                                 reason=f"period / interval must be at most {MAX_SIZING_SAMPLES:,} samples"))
    # default 5 min: minute-scale ramps (job starts, checkpoints) are smoothed over 1-5 minutes
    raw_window = query.get("window", "5min")
    if "interval" in out:
        try:
            out["window"] = window_samples(raw_window, out["interval"])
        except BatteryInputError as exc:
            fields.append(FieldError(field="window", value=raw_window, reason=str(exc)))
    for name, default, ok, reason in _SIZING_NUMBERS:
        raw = query.get(name, default)
        if raw is None:
            out[name] = None
            continue
        try:
            v = float(raw)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and ok(v)):
            fields.append(FieldError(field=name, value=raw, reason=reason))
        out[name] = v
    trailing = query.get("trailing", "false").lower()
    if trailing not in ("true", "false", "1", "0"):
        fields.append(FieldError(field="trailing", value=trailing, reason="must be true or false"))
    out["trailing"] = trailing in ("true", "1")
    return invalid(fields) if fields else out
