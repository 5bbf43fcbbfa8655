"""`cnsched bench detect --cv`: how the detector's thresholds were chosen, and how well that choice
holds on files it never saw — leave-files-out cross-validation over the labelled RTT traces.

The files are dealt into ``folds`` folds (in name order, round robin). For each fold, every policy of
the grid runs on the other folds' files; the one with the highest recall within two windows among
those at or under ``target`` strict false alarms per path-day, in an incident at most MAX_ALARM_SHARE
of the time, and holding the second set if one is given (the artificial traces: at least 85 % within
two windows at 0.05 strict false alarms per path-day over all of them) is chosen (ties: fewer false
alarms, then the higher recall within the hour; none eligible: the fewest false alarms), and it is
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
from streams.analytics.rtt_series import rises
from streams.dev.bench.detect import Tally, detect, score
from streams.dev.bench.detect_bocpd import (
    BOCPD_GRID,
    BocpdPolicy,
    bocpd_alarms,
    bocpd_policies,
    change_probability,
)
from streams.dev.bench.detect_cusum import CUSUM_GRID, CusumPolicy, cusum_alarms, cusum_policies

SECOND_RECALL, SECOND_TARGET = 0.85, 0.05  # what the second set must hold (issue 31: the artificial traces)
MAX_ALARM_SHARE = 0.02  # of path-time in an incident: more and "caught" can mean "was on anyway" (bench detect)
GRID = {
    "baseline": (60, 120),
    "floor_q": (0.05, 0.1),
    "factor": (1.15, 1.2, 1.22, 1.25, 1.3),
    "sustain": (1.01, 1.05, 1.1),
    "min_sigmas": (6.0, 10.0, 15.0, 20.0, 30.0),
    "hold": (15, 30),
    "loss_min": (2, 3),
}


def policies(grid: dict = GRID) -> list[DetectorPolicy]:
    """Every valid policy of the grid (sustain above factor is left out), DEFAULT_POLICY's other fields."""
    out = []
    for values in itertools.product(*grid.values()):
        kw = dict(zip(grid, values, strict=True))
        if kw.get("sustain", DEFAULT_POLICY.sustain) <= kw.get("factor", DEFAULT_POLICY.factor):
            out.append(dataclasses.replace(DEFAULT_POLICY, **kw))
    return out


def tallies(series, grid: list, min_ratio: float) -> np.ndarray:
    """object[policies, files]: each policy's Tally on each series (DetectorPolicy: the floor rule;
    CusumPolicy: the CUSUM; BocpdPolicy: the Bayesian change points — each with the floor rule's loss leg)."""
    out = np.empty((len(grid), len(series)), object)
    for f, s in enumerate(series):
        events = rises(s.rtt, s.change, min_ratio)
        x = s.rtt[None]
        lost = (~np.isfinite(s.rtt)).astype(np.float64)[None]
        stats, loss, posterior = {}, {}, {}
        for i, p in enumerate(grid):
            fp = p if isinstance(p, DetectorPolicy) else p.floor_policy()
            key = (fp.baseline, fp.floor_q, fp.k)
            if key not in stats:
                stats[key] = window_stats(x, fp)
            leg = (fp.baseline, fp.loss_windows, fp.loss_min)
            if leg not in loss:
                loss[leg] = loss_alarms(lost, np.ones_like(lost), fp)[0]
            if isinstance(p, CusumPolicy):
                alarm = cusum_alarms(x, p, stats[key])[0] | loss[leg]
            elif isinstance(p, BocpdPolicy):
                if p.posterior_key not in posterior:
                    posterior[p.posterior_key] = change_probability(x, p, stats[key])
                alarm = bocpd_alarms(x, p, stats[key], posterior[p.posterior_key])[0] | loss[leg]
            else:
                alarm = detect(s.rtt, p, stats[key], loss[leg])
            out[i, f] = score(alarm, events, s.change, p.memory, s.step_s)
    return out


def _sum(row) -> Tally:
    t = Tally()
    for x in row:
        t.add(x)
    return t


def choose(table: np.ndarray, files: np.ndarray, target: float, max_alarm_share: float = MAX_ALARM_SHARE,
           eligible: np.ndarray | None = None) -> int:
    """The row of the policy chosen on ``files`` (module docstring); ``eligible``: bool[policies], those
    that hold the second set."""
    best, best_key = 0, None
    for i in range(table.shape[0]):
        t = _sum(table[i, files])
        fa = t.false_strict / t.days
        ok = fa <= target and t.alarm_windows <= max_alarm_share * t.windows and (eligible is None or eligible[i])
        key = (ok, t.caught if ok else -fa, -fa, t.caught_hour)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


def holds(table: np.ndarray, recall: float = SECOND_RECALL, target: float = SECOND_TARGET) -> np.ndarray:
    """bool[policies]: those that catch ``recall`` of a set's rises within two windows at ``target``
    strict false alarms per path-day or fewer, over all its files."""
    out = np.zeros(table.shape[0], bool)
    for i in range(table.shape[0]):
        t = _sum(table[i])
        out[i] = bool(t.events) and t.caught >= recall * t.events and t.false_strict <= target * t.days
    return out


def cross_validate(series, min_ratio: float = 1.2, folds: int = 5, target: float = 0.05,
                   grid: dict | None = None, method: str = "floor", second=None) -> dict:
    """Held-out figures of the tuning procedure, the policy chosen per fold, and how often each was.
    ``method``: "floor" (core.detect, over GRID), "cusum" (detect_cusum, over CUSUM_GRID) or "bocpd"
    (detect_bocpd, over BOCPD_GRID).
    ``second``: another labelled set (the artificial traces) a chosen policy must hold (:func:`holds`)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}")
    grid = METHODS[method][1] if grid is None else grid
    pols = METHODS[method][0](grid)
    table = tallies(series, pols, min_ratio)
    eligible = holds(tallies(second, pols, min_ratio)) if second else None
    fold_of = np.arange(len(series)) % folds
    held, chosen = Tally(), []
    step = series[0].step_s if series else 240.0
    for k in range(folds):
        i = choose(table, np.flatnonzero(fold_of != k), target, eligible=eligible)
        test = _sum(table[i, np.flatnonzero(fold_of == k)])
        held.add(test)
        chosen.append({"files": " ".join(s.name for s, f in zip(series, fold_of, strict=True) if f == k),
                       "policy": _fields(pols[i], grid), "held_out": test.summary(step)})
    counts = Counter(tuple(sorted(c["policy"].items())) for c in chosen)
    everything = np.arange(len(series))
    best = choose(table, everything, target, eligible=eligible)
    return {"method": method, "policies": len(pols), "folds": folds, "target": target,
            "holding_the_second_set": None if eligible is None else int(eligible.sum()),
            "held_out": held.summary(step),
            # the same choice made on every file and scored on them: a ceiling, not a result (in-sample)
            "in_sample_best": {"policy": _fields(pols[best], grid), **_sum(table[best, everything]).summary(step)},
            "fold": dict(enumerate(chosen)), "most_chosen": dict(counts.most_common(1)[0][0]) if counts else None}


METHODS = {"floor": (policies, GRID), "cusum": (cusum_policies, CUSUM_GRID), "bocpd": (bocpd_policies, BOCPD_GRID)}


def _fields(p, grid: dict) -> dict:
    return {k: getattr(p, k) for k in grid}
