"""A battery sizing for the terminal (a table) and as a PNG chart (matplotlib)."""

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
        ("window discharge", f"{s.window_discharge_kwh:,.1f} kWh   (most discharged within one window)"),
        ("recommended energy", f"{s.recommended_energy_kwh:,.1f} kWh   (largest of the four x {margin:g} / "
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


def plot(s: Sizing, load: np.ndarray, path, interval_s: float = 60.0) -> None:
    """Load, the smoothed target and the battery's compensation over time (minutes)."""
    from streams.render.charts import line_chart

    minutes = np.arange(load.size) * interval_s / 60.0
    line_chart(path, [("load", load), ("target", s.target_mw), ("compensation (battery)", s.compensation_mw)],
               title=f"battery {s.power_capacity_mw:,.1f} MW / {s.recommended_energy_kwh:,.0f} kWh: "
                     f"max ramp {s.original_max_ramp_mw_per_min:,.2f} -> {s.smoothed_max_ramp_mw_per_min:,.2f} MW/min",
               xlabel="minutes", ylabel="MW", x=minutes)
