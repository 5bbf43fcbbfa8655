"""`cnsched bench battery`: a year of 1-minute power sized by the vectorised core beside its
per-sample reference."""

from __future__ import annotations

import time

import numpy as np


def bench_battery(samples: int = 525_600, window: int = 15, seed: int = 0) -> dict:
    """Battery sizing of a year of 1-minute facility power (block and trailing targets): the
    vectorised core beside its per-sample reference, best of three."""
    from core.battery import size_battery, size_battery_reference

    rng = np.random.default_rng(seed)
    t = np.arange(samples)
    load = np.abs(60 + 25 * np.sin(2 * np.pi * t / 1440) + np.cumsum(rng.normal(0, 0.2, samples))
                  + 15 * (rng.random(samples) < 0.01))
    out: dict = {"samples": samples, "window": window}
    for kind in ("block", "trailing"):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            size_battery(load, 60.0, window, trailing=kind == "trailing")
            best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        size_battery_reference(load, 60.0, window, trailing=kind == "trailing")
        ref = time.perf_counter() - t0
        out[f"{kind}_seconds"] = best
        out[f"{kind}_reference_seconds"] = ref
        out[f"{kind}_ratio"] = ref / best
    return out
