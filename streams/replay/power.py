"""The replay's site power: each card draws ``card_kw`` while its job works (from its start — after
any power-aware delay — to its stop), so every site has a power curve. With a ramp limit the jobs'
starts are spaced (the Scheduler's RampBook for our policies, the same book here for the baselines),
and the figures say what an operator of the grid connection sees: the steepest rise in a minute,
the minutes over the limit, and the battery (core.battery, block target over ``battery_window``
minutes) that smooths what is left.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from core.battery import size_battery
from core.ramp import ramps
from streams.worker.scheduling.ramp import RampBook

STEP_S = 60.0


class SitePower:
    def __init__(self, sites: list[str], card_kw: float, limit_mw_per_min: float) -> None:
        self.sites, self.card_kw, self.limit = sites, card_kw, limit_mw_per_min
        self.book = RampBook({"*": limit_mw_per_min} if limit_mw_per_min > 0 else {})
        self.events: list[tuple[float, int, float]] = []  # (time, site, +/- MW)
        self.on_at: dict[int, tuple[float, dict[int, float]]] = {}  # job -> (when it draws, site -> MW)

    def draw(self, node_site: np.ndarray, members: list[int], cards: int) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        for m in members:
            out[int(node_site[m])] += cards * self.card_kw / 1000.0
        return dict(out)

    def spaced(self, now: float, draw: dict[int, float]) -> float:
        """A baseline's start under the ramp limit (our policies get theirs from the decision)."""
        return self.book.book({self.sites[s]: mw for s, mw in draw.items()}, now) if self.book.limits else now

    def on(self, j: int, at: float, draw: dict[int, float]) -> None:
        if self.card_kw > 0:
            self.on_at[j] = (at, draw)
            self.events += [(at, s, mw) for s, mw in draw.items()]

    def off(self, j: int, now: float) -> None:
        if j in self.on_at:
            at, draw = self.on_at.pop(j)
            self.events += [(max(now, at), s, -mw) for s, mw in draw.items()]

    def curves(self, end_s: float) -> np.ndarray:
        """float64[S, T]: each site's MW at the end of every minute up to ``end_s``."""
        steps = int(end_s // STEP_S) + 1
        out = np.zeros((len(self.sites), steps))
        if not self.events:
            return out
        t, s, mw = (np.array(x) for x in zip(*self.events, strict=True))
        idx = np.minimum((t // STEP_S).astype(np.int64), steps - 1)
        np.add.at(out, (s.astype(np.int64), idx), mw)
        return np.maximum(np.cumsum(out, axis=1), 0.0)  # rounding never makes a site draw below zero

    def summary(self, end_s: float, battery_window: int = 15) -> dict:
        """The worst site's figures: steepest one-minute rise, minutes rising faster than the limit,
        and the battery that smooths its curve over ``battery_window`` minutes (0 without power)."""
        curves = self.curves(end_s)
        rises = [ramps(np.concatenate([[0.0], c]))[1:] for c in curves]  # nothing drawn before the start
        rise = np.array([r.max(initial=0.0) for r in rises])
        over = int(sum((r > self.limit + 1e-9).sum() for r in rises)) if self.limit > 0 else 0
        energy = power = 0.0
        if self.card_kw > 0 and curves.shape[1] >= battery_window:
            for c in curves:
                b = size_battery(c, STEP_S, battery_window, ramp_limit=self.limit or None)
                energy, power = max(energy, b.recommended_energy_kwh), max(power, b.power_capacity_mw)
        return {"max_ramp_mw_per_min": round(float(rise.max(initial=0.0)), 3), "minutes_over_limit": over,
                "peak_mw": round(float(curves.max(initial=0.0)), 3),
                "energy_mwh": round(float(curves.sum()) * STEP_S / 3600.0, 3),
                "battery_mwh": round(energy / 1000.0, 3), "battery_mw": round(power, 3)}
