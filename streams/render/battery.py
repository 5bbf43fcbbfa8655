"""A battery sizing for the terminal (a table) and as a PNG chart."""

from __future__ import annotations

import numpy as np

from core.battery import Sizing


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
