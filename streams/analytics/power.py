"""Power smoothing around core.battery: a site's stored `power_mw` windows sized as a battery, the
window and interval rules shared by the CLI and the API, and the sizing as a JSON body."""

from __future__ import annotations

import math

import numpy as np

from core.battery import BatteryInputError, Sizing, size_battery
from schemas.units import parse_duration
from sinks.duckdb_store import DuckStore
from sinks.queries import latest_window_start, load_series
from streams.analytics import stop_if_abandoned

JSON_KEYS = ("power_capacity_mw", "discharge_energy_kwh", "charge_energy_kwh", "soc_swing_kwh", "window_discharge_kwh",
             "recommended_energy_kwh", "original_max_ramp_mw_per_min", "smoothed_max_ramp_mw_per_min",
             "smoothing_rate_pct")


def window_samples(window: str, interval_s: float) -> int:
    """``window`` as a sample count ("15") or a duration ("15min", a whole number of intervals)."""
    if window.strip().isdigit():
        n = int(window)
    else:
        try:
            seconds = parse_duration(window)
        except ValueError as exc:
            raise BatteryInputError(f"window: {exc}; or give a number of samples") from None
        n = seconds / interval_s
        if abs(n - round(n)) > 1e-9 * max(n, 1):
            raise BatteryInputError(f"window {window} is not a whole number of {interval_s:g} s intervals")
        n = round(n)
    if n < 1:
        raise BatteryInputError(f"window must be at least one sample, got {window}")
    return int(n)


def interval_seconds(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise BatteryInputError(f"interval: {exc}") from None


def sizing_body(s: Sizing, extra: dict, series: bool = True) -> dict:
    out = {k: _num(getattr(s, k)) for k in JSON_KEYS}
    out["target_max_ramp_mw_per_min"] = _num(s.target_max_ramp_mw_per_min)
    out["ramp_limit_met"] = s.ramp_limit_met
    out.update(extra)
    if series:
        out["target_mw"] = [round(float(v), 9) for v in s.target_mw]
        out["compensation_mw"] = [round(float(v), 9) for v in s.compensation_mw]
    return out


def _num(v: float) -> float:
    return round(float(v), 9) if math.isfinite(v) else None


class TooFewSamples(BatteryInputError):
    """The stored series is shorter than one window."""

    def __init__(self, have: int, needed: int) -> None:
        self.have, self.needed = have, needed
        super().__init__(f"{have} interval(s) of power_mw in the period, fewer than one window of {needed}")


def size_site(db_path, site: str, q: dict, cancel=None) -> dict | None:
    """Sizing of a site's stored series (the --json keys and the series' extent); None when the site
    has no power_mw history; TooFewSamples when it has less than one window. ``cancel`` (a
    threading.Event): once set, the work stops before its next step (Abandoned)."""
    with DuckStore.open(db_path, read_only=True, timeout_s=5.0) as store:
        latest = latest_window_start(store.con, site, "", "power_mw")
        if latest is None:
            return None
        since = latest - q["period"] + q["interval"]
        values, start, gaps = site_series(store.con, site, q["interval"], since)
    stop_if_abandoned(cancel, "the sizing began")
    if values.size < q["window"]:
        raise TooFewSamples(int(values.size), q["window"])
    s = size_battery(values, q["interval"], q["window"], q["margin"], q["ramp_limit"], q["dod"], q["trailing"])
    return sizing_body(s, {"site": site, "from": start, "to": start + values.size * q["interval"],
                       "samples": int(values.size), "gaps_filled": gaps, "interval_s": q["interval"],
                       "window_samples": q["window"], "margin": q["margin"], "dod": q["dod"],
                       "ramp_limit_mw_per_min": q["ramp_limit"], "target": "trailing" if q["trailing"] else "block"})


def site_series(con, site: str, interval_s: float, since: float) -> tuple[np.ndarray, float, int]:
    """A site's stored power (mean of `power_mw` windows) per interval since ``since``: values, the
    start time, and how many empty intervals were filled by linear interpolation."""
    found, values, first = load_series(con, "power_mw", "mean", interval_s, src=site, dst="", since=since)
    if not found:
        return np.zeros(0), since, 0
    values = values[0]
    gaps = np.isnan(values)
    if gaps.any():
        x = np.arange(values.size)
        values[gaps] = np.interp(x[gaps], x[~gaps], values[~gaps])
    return values, first, int(gaps.sum())
