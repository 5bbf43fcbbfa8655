"""`cnsched bench detect --cv`: how the detector's thresholds were chosen, and how well that choice
holds on files it never saw — leave-files-out cross-validation over the labelled RTT traces.

The files are dealt into ``folds`` folds (in name order, round robin). For each fold, every policy of
the grid runs on the other folds' files; the one with the highest recall within two windows among
those at or under ``target`` strict false alarms per path-day is chosen (ties: fewer false alarms,
then the higher recall within the hour; none under the target: the fewest false alarms), and it is
scored on the held-out fold. The held-out tallies add up to the cross-validated figures. The grid
shares the costly part (the floor and spread of every window, per baseline and floor quantile) across
the thresholds that differ only in how they read it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter

import numpy as np

from core.detect import DEFAULT_POLICY, DetectorPolicy, loss_alarms, window_stats
from streams.dev.bench.detect import Tally, detect, rises, score

GRID = {
    "baseline": (60, 120, 240),
    "floor_q": (0.05, 0.1, 0.25),
    "factor": (1.15, 1.2, 1.25, 1.3),
    "sustain": (1.05, 1.1, 1.15),
    "min_sigmas": (2.0, 3.0, 6.0),
    "hold": (0, 15, 30),
    "loss_windows": (2, 3),
}


def policies(grid: dict = GRID) -> list[DetectorPolicy]:
    """Every valid policy of the grid (sustain above factor is left out), DEFAULT_POLICY's other fields."""
    out = []
    for values in itertools.product(*grid.values()):
        kw = dict(zip(grid, values, strict=True))
        if kw.get("sustain", DEFAULT_POLICY.sustain) <= kw.get("factor", DEFAULT_POLICY.factor):
            out.append(dataclasses.replace(DEFAULT_POLICY, **kw))
    return out


def tallies(series, grid: list[DetectorPolicy], min_ratio: float) -> np.ndarray:
    """object[policies, files]: each policy's Tally on each series."""
    out = np.empty((len(grid), len(series)), object)
    for f, s in enumerate(series):
        events = rises(s.rtt, s.change, min_ratio)
        x = s.rtt[None]
        lost = (~np.isfinite(s.rtt)).astype(np.float64)[None]
        stats, loss = {}, {}
        for i, p in enumerate(grid):
            key = (p.baseline, p.floor_q, p.k)
            if key not in stats:
                stats[key] = window_stats(x, p)
            if (p.baseline, p.loss_windows) not in loss:
                loss[p.baseline, p.loss_windows] = loss_alarms(lost, np.ones_like(lost), p)[0]
            out[i, f] = score(detect(s.rtt, p, stats[key], loss[p.baseline, p.loss_windows]), events, s.change,
                              p.memory, s.step_s)
    return out


def _sum(row) -> Tally:
    t = Tally()
    for x in row:
        t.add(x)
    return t


def choose(table: np.ndarray, files: np.ndarray, target: float) -> int:
    """The row of the policy chosen on ``files`` (module docstring)."""
    best, best_key = 0, None
    for i in range(table.shape[0]):
        t = _sum(table[i, files])
        fa = t.false_strict / t.days
        key = (fa <= target, t.caught if fa <= target else -fa, -fa, t.caught_hour)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


def cross_validate(series, min_ratio: float = 1.2, folds: int = 5, target: float = 0.05,
                   grid: dict = GRID) -> dict:
    """Held-out figures of the tuning procedure, the policy chosen per fold, and how often each was."""
    pols = policies(grid)
    table = tallies(series, pols, min_ratio)
    fold_of = np.arange(len(series)) % folds
    held, chosen = Tally(), []
    step = series[0].step_s if series else 240.0
    for k in range(folds):
        i = choose(table, np.flatnonzero(fold_of != k), target)
        test = _sum(table[i, np.flatnonzero(fold_of == k)])
        held.add(test)
        chosen.append({"files": " ".join(s.name for s, f in zip(series, fold_of, strict=True) if f == k),
                       "policy": _fields(pols[i], grid), "held_out": test.summary(step)})
    counts = Counter(tuple(sorted(c["policy"].items())) for c in chosen)
    return {"policies": len(pols), "folds": folds, "target": target, "held_out": held.summary(step),
            "fold": dict(enumerate(chosen)), "most_chosen": dict(counts.most_common(1)[0][0]) if counts else None}


def _fields(p: DetectorPolicy, grid: dict) -> dict:
    return {k: getattr(p, k) for k in grid}
