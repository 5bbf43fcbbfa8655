"""Request parameters of the HTTP API: pure functions from the query (a mapping of strings) to
values, or to an ErrorBody naming every field that is wrong and why (answered as 400)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from schemas.api import ErrorBody, FieldError
from schemas.compute import NODE_ID_PATTERN
from schemas.units import parse_duration
from sinks.queries import STATS

_ID = re.compile(NODE_ID_PATTERN)
METRIC_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_METRIC = re.compile(METRIC_PATTERN)
MAX_HORIZON_STEPS = 10_080
# what the API takes as a duration: a whole number of seconds (bare or s), minutes (min or m), hours or
# days — never zero, never under a second (ms is for the CLI); /openapi.json names this pattern
DURATION_PATTERN = r"^0*[1-9][0-9]{0,8}(s|min|m|h|d)?$"
_DURATION = re.compile(DURATION_PATTERN)
DURATION_REASON = "must be a whole number of s, min (or m), h or d, at least 1 s: e.g. 90s, 5min, 2h, 1d"
NUMBER_PATTERN = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"  # a JSON number, as a query string carries it
_NUMBER = re.compile(NUMBER_PATTERN)
# forecast resolutions: from a second to a day, each dividing a day (so daily rhythms line up)
_MINUTES = ("1", "2", "5", "10", "15", "20", "30")
STEPS = ("1s", "2s", "5s", "10s", "15s", "20s", "30s", *(f"{m}min" for m in _MINUTES), *(f"{m}m" for m in _MINUTES),
         "1h", "2h", "3h", "4h", "6h", "8h", "12h", "1d")
TRUTH = {"true": True, "false": False, "1": True, "0": False}


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
    """The named duration parameters in seconds (DURATION_PATTERN); a malformed one adds a field
    error instead."""
    out = {}
    for name, default in defaults.items():
        raw = query.get(name, default)
        if _DURATION.fullmatch(raw) is None:
            fields.append(FieldError(field=name, value=raw, reason=DURATION_REASON))
        else:
            out[name] = parse_duration(raw)
    return out


def forecast_query(query: Mapping[str, str], default_step_s: float) -> dict | ErrorBody:
    """{metric, stat, step_s, horizon_steps, history_steps_shown} of a forecast request (``history``:
    how much of the past to answer with, as steps; default none). ``step`` is one of STEPS; the horizon
    is rounded up to whole steps, and it and the history are cut at MAX_HORIZON_STEPS steps (the
    answer's horizon_s and history say what was done): every value /openapi.json allows is answered."""
    fields: list[FieldError] = []
    metric = query.get("metric", "rtt_ms")
    if not _METRIC.fullmatch(metric):
        fields.append(FieldError(field="metric", value=metric, reason="must be a metric name"))
    stat = query.get("stat", "mean")
    if stat not in STATS:
        fields.append(FieldError(field="stat", value=stat, reason=f"must be one of {', '.join(STATS)}"))
    step_s = default_step_s
    if "step" in query:
        if query["step"] in STEPS:
            step_s = parse_duration(query["step"])
        else:
            fields.append(FieldError(field="step", value=query["step"],
                                     reason=f"must be one of {', '.join(STEPS)}: steps that divide a day"))
    out = durations(query, fields, horizon="60m")
    if "history" in query:
        out.update(durations(query, fields, history=query["history"]))
    if fields:
        return invalid(fields)
    steps = min(math.ceil(out["horizon"] / step_s - 1e-9), MAX_HORIZON_STEPS)
    back = min(int(out.get("history", 0.0) // step_s), MAX_HORIZON_STEPS)
    return {"metric": metric, "stat": stat, "step_s": step_s, "horizon_steps": max(steps, 1),
            "history_steps_shown": back}


_SIZING_NUMBERS = (("margin", "1.2", lambda v: 0 < v <= 100, "must be in (0, 100]"),
                   ("dod", "0.9", lambda v: 0 < v <= 1, "must be in (0, 1]"),
                   ("ramp_limit", None, lambda v: 0 < v <= 1e6, "must be in (0, 1e6] MW/min"))


MAX_SIZING_SAMPLES = 1_000_000  # the work of one sizing request is bounded by it (a week at 1 s is 604,800)
MAX_SIZING_PERIOD_S = 31 * 86_400


def smoothing_query(query: Mapping[str, str]) -> dict | ErrorBody:
    """{interval, period, window, margin, dod, ramp_limit, trailing} of a battery sizing request.
    ``interval``, ``period`` and ``window`` follow DURATION_PATTERN (a bare ``window`` is a number of
    intervals). The period is cut to 31 days and to MAX_SIZING_SAMPLES intervals, and a window is
    rounded to whole intervals (at least one): the answer's from, to and window_samples say what was
    used, and every value /openapi.json allows is answered."""
    fields: list[FieldError] = []
    out: dict = durations(query, fields, interval="1min", period="1d")
    if "interval" in out and "period" in out:
        out["period"] = min(out["period"], MAX_SIZING_PERIOD_S, MAX_SIZING_SAMPLES * out["interval"])
    # default 5 min: minute-scale ramps (job starts, checkpoints) are smoothed over 1-5 minutes
    raw_window = query.get("window", "5min")
    if _DURATION.fullmatch(raw_window) is None:
        fields.append(FieldError(field="window", value=raw_window, reason=DURATION_REASON + ", or intervals: 15"))
    elif "interval" in out:
        out["window"] = int(raw_window) if raw_window.isdigit() else \
            max(1, round(parse_duration(raw_window) / out["interval"]))
    for name, default, ok, reason in _SIZING_NUMBERS:
        raw = query.get(name, default)
        if raw is None:
            out[name] = None
            continue
        v = float(raw) if _NUMBER.fullmatch(raw) else math.nan
        if not (math.isfinite(v) and ok(v)):
            fields.append(FieldError(field=name, value=raw, reason=reason))
        out[name] = v
    trailing = query.get("trailing", "false")
    if trailing not in TRUTH:
        fields.append(FieldError(field="trailing", value=trailing, reason="must be true or false (or 1 or 0)"))
    out["trailing"] = TRUTH.get(trailing, False)
    return invalid(fields) if fields else out
