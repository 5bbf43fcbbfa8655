"""Power smoothing around core.battery: reading a power series (arguments, CSV, stdin, or a site's
stored `power_mw` windows in DuckDB), and presenting a sizing (JSON, a table, a PNG chart)."""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from core.battery import BatteryInputError, Sizing
from schemas.units import parse_duration

JSON_KEYS = ("power_capacity_mw", "discharge_energy_kwh", "charge_energy_kwh", "soc_swing_kwh",
             "recommended_energy_kwh", "original_max_ramp_mw_per_min", "smoothed_max_ramp_mw_per_min",
             "smoothing_rate_pct")


def parse_values(items: list[str]) -> np.ndarray:
    """Power values given as arguments."""
    out = []
    for i, s in enumerate(items, start=1):
        try:
            out.append(float(s))
        except ValueError:
            raise BatteryInputError(f"value {i} ({s!r}) is not a number (nor a file)") from None
    return np.array(out)


def read_csv(text: str, column: str | None = None) -> np.ndarray:
    """Power values from CSV text: with a header, the column ``column`` (default `power_mw`, else
    the last column); without one, the last column of every row. Blank lines and lines starting
    with '#' are skipped."""
    rows = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text)), start=1)
            if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
    if not rows:
        raise BatteryInputError("no values in the input")
    first = [c.strip() for c in rows[0][1]]
    idx = -1
    if not _is_number(first[-1]) or (column is not None):
        header = first
        if column is not None and column not in header:
            raise BatteryInputError(f"no column {column!r} in the header ({', '.join(header)})")
        name = column or ("power_mw" if "power_mw" in header else header[-1])
        idx = header.index(name)
        rows = rows[1:]
    values = []
    for n, r in rows:
        cell = r[idx].strip() if -len(r) <= idx < len(r) else ""
        try:
            values.append(float(cell))
        except ValueError:
            raise BatteryInputError(f"line {n}: {cell!r} is not a number") from None
    return np.array(values)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


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


def as_json(s: Sizing, extra: dict, series: bool = True) -> dict:
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


def as_table(s: Sizing, n: int, interval_s: float, window: int, margin: float, dod: float,
             ramp_limit: float | None, trailing: bool) -> str:
    kind = "trailing moving average" if trailing else "block (tumbling) mean"
    rows = [
        ("samples", f"{n:,} at {interval_s:g} s; window {window} samples ({window * interval_s:g} s), {kind}"),
        ("power capacity", f"{s.power_capacity_mw:,.3f} MW   (max |compensation| x margin {margin:g})"),
        ("discharge energy", f"{s.discharge_energy_kwh:,.1f} kWh   (largest uninterrupted discharge)"),
        ("charge energy", f"{s.charge_energy_kwh:,.1f} kWh   (largest uninterrupted charge)"),
        ("state-of-charge swing", f"{s.soc_swing_kwh:,.1f} kWh"),
        ("recommended energy", f"{s.recommended_energy_kwh:,.1f} kWh   (largest of the three x {margin:g} / "
                               f"depth of discharge {dod:g})"),
        ("original max ramp", f"{s.original_max_ramp_mw_per_min:,.3f} MW/min"),
        ("smoothed max ramp", f"{s.smoothed_max_ramp_mw_per_min:,.3f} MW/min   ("
                              + ("the grid ramp limit" if ramp_limit is not None else "the target curve's") + ")"),
        ("smoothing rate", f"{s.smoothing_rate_pct:,.1f} %"),
    ]
    text = "\n".join(f"{k:<24}{v}" for k, v in rows)
    if not s.ramp_limit_met:
        text += (f"\nwarning: the target curve itself ramps {s.target_max_ramp_mw_per_min:,.3f} MW/min, more than "
                 f"the limit {ramp_limit:g}; use --trailing or a longer window")
    return text + "\n"


def plot(s: Sizing, load: np.ndarray, path) -> None:
    from streams.render.png import line_chart

    data = line_chart([("load", load, (31, 119, 180)), ("target", s.target_mw, (255, 127, 14)),
                       ("compensation", s.compensation_mw, (44, 160, 44))])
    with open(path, "wb") as f:
        f.write(data)


class TooFewSamples(BatteryInputError):
    """The stored series is shorter than one window."""

    def __init__(self, have: int, needed: int) -> None:
        self.have, self.needed = have, needed
        super().__init__(f"{have} interval(s) of power_mw in the period, fewer than one window of {needed}")


def size_site(db_path, site: str, q: dict) -> dict | None:
    """Sizing of a site's stored series (the --json keys and the series' extent); None when the site
    has no power_mw history; TooFewSamples when it has less than one window."""
    from core.battery import size_battery
    from sinks.duckdb_store import DuckStore

    with DuckStore.open(db_path, read_only=True, timeout_s=5.0) as store:
        latest = store.con.execute("SELECT max(window_start) FROM windows WHERE src = ? AND dst = '' "
                                   "AND metric = 'power_mw'", [site]).fetchone()[0]
        if latest is None:
            return None
        since = latest - q["period"] + q["interval"]
        values, start, gaps = site_series(store.con, site, q["interval"], since)
    if values.size < q["window"]:
        raise TooFewSamples(int(values.size), q["window"])
    s = size_battery(values, q["interval"], q["window"], q["margin"], q["ramp_limit"], q["dod"], q["trailing"])
    return as_json(s, {"site": site, "from": start, "to": start + values.size * q["interval"],
                       "samples": int(values.size), "gaps_filled": gaps, "interval_s": q["interval"],
                       "window_samples": q["window"], "margin": q["margin"], "dod": q["dod"],
                       "ramp_limit_mw_per_min": q["ramp_limit"], "target": "trailing" if q["trailing"] else "block"})


def site_series(con, site: str, interval_s: float, since: float) -> tuple[np.ndarray, float, int]:
    """A site's stored power (mean of `power_mw` windows) per interval since ``since``: values, the
    start time, and how many empty intervals were filled by linear interpolation."""
    from streams.analytics.backtest import load_series

    found, values, first = load_series(con, "power_mw", "mean", interval_s, src=site, dst="", since=since)
    if not found:
        return np.zeros(0), since, 0
    values = values[0]
    gaps = np.isnan(values)
    if gaps.any():
        x = np.arange(values.size)
        values[gaps] = np.interp(x[gaps], x[~gaps], values[~gaps])
    return values, first, int(gaps.sum())
