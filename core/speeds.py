"""A workload's speed on each card model, from the step rates its runners measured (issue 52: "the
throughput the runner measured for that card class"). The metering says how fast a card is for work
in general (core.ect.card_speed); one model of network may gain little from the newer card, or lose:
Gavel's measurements (Narayanan et al., OSDI 2020) have its recommendation model at 0.45x on a V100
against a P100, ResNet-18 at 1.08x, a CycleGAN at 1.84x, where the datasheets say 1.48x.

Speeds stay in the metering's unit (1: the pool's slowest card for work in general): among the card
models the workload's runs measured, the one the metering calls slowest keeps its metered speed, and
each other measured model is that speed times its rate over the anchor's. A model nobody measured for
the workload keeps its metered speed; with fewer than two models measured nothing changes (a ratio
needs two)."""

from __future__ import annotations

import numpy as np


def workload_speeds(metered: np.ndarray, model: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """float64[N]: each node's speed for one workload. ``metered`` float64[N] the metering's speeds;
    ``model`` int64[N] each node's card model (a code; -1: unknown, kept metered); ``rate`` float64[M]
    the workload's measured rate on each model code (NaN, 0 or negative: not measured).

    Worked: metered [1.0, 1.5, 1.5, 2.0] on models [0, 1, 1, 2], rates [48.9, 23.3, NaN] -> the anchor
    is model 0 (metered 1.0, the slowest measured), model 1 runs at 1.0 x 23.3 / 48.9 = 0.4765, model 2
    is not measured: [1.0, 0.4765, 0.4765, 2.0]."""
    metered = np.asarray(metered, np.float64)
    model = np.asarray(model, np.int64)
    rate = np.asarray(rate, np.float64)
    out = metered.copy()
    if not rate.size or not metered.size:
        return out
    known_model = (model >= 0) & (model < rate.size)
    code = np.where(known_model, model, 0)
    measured = np.isfinite(rate) & (rate > 0)
    on = known_model & measured[code]  # nodes of a measured model
    if np.unique(model[on]).size < 2:
        return out
    anchor_node = np.flatnonzero(on)[np.argmin(metered[on])]  # the slowest measured model's node
    scale = metered[anchor_node] / rate[model[anchor_node]]
    out[on] = rate[code[on]] * scale
    return out
