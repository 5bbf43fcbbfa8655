"""The alpha a task is scored with: an explicit alpha on the task wins, then its parallelism
strategy's, then its type's default (core.vocabulary; learned defaults replace the built-in ones).

A training type's low alpha speaks of the traffic between its workers (gradients every step,
activations both ways). A training task on one node has no such traffic: the network costs it only
the time its loads take (data, model, image), which the load term prices on its own. Its network
weight is then that share of its time (:func:`one_node_alphas`)."""

from __future__ import annotations

import numpy as np

from core.vocabulary import DEFAULT_TYPES, PLAIN_NODE_PENALTY, STRATEGY_ALPHA, TypeDefaults

WORKER_TRAFFIC_KINDS = ("training",)  # compute kinds whose type alpha is about traffic between workers


def task_alpha(task_type: str, explicit: float | None = None, strategy: str | None = None,
               types: dict[str, TypeDefaults] = DEFAULT_TYPES) -> float:
    """The alpha a task is scored with: explicit, else its strategy's, else its type's."""
    if explicit is not None:
        return float(explicit)
    by_strategy = STRATEGY_ALPHA.get(strategy or "")
    if by_strategy is not None:
        return min(by_strategy, types[task_type].alpha)
    return types[task_type].alpha


def one_node_alphas(alpha: np.ndarray, one_node: np.ndarray, load_s: np.ndarray,
                    duration_s: np.ndarray) -> np.ndarray:
    """float64[J]: ``alpha`` where ``one_node`` is False; where True (a training task on one node, its
    alpha not given nor learned), ``max(alpha, 1 - load_s / (load_s + duration_s))``: the network
    weighs the share of the task's time its loads take. ``load_s``: its loads at the best path (0: it
    loads nothing, then the alpha is 1 whatever the duration); ``duration_s``: its expected run (NaN
    or <= 0: unknown, and a task that loads keeps ``alpha``). An unreachable or unknown load (inf, NaN) keeps ``alpha``.
    Worked: alpha 0.2, a 500 GB load at 10 Gbit/s (400 s) before a 3,600 s run -> 1 - 400/4,000 = 0.9;
    before a 100 s run -> max(0.2, 0.2) = 0.2."""
    a = np.asarray(alpha, np.float64)
    load = np.asarray(load_s, np.float64)
    dur = np.asarray(duration_s, np.float64)
    known = np.isfinite(dur) & (dur > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(np.isnan(load), np.nan,
                         np.where(load > 0, load / (load + np.where(known, dur, np.nan)), 0.0))
    use = np.asarray(one_node, bool) & np.isfinite(share)
    return np.where(use, np.maximum(a, 1.0 - np.where(use, share, 0.0)), a)


def accel_penalty(defaults: TypeDefaults, cards: int) -> float:
    """Points a task loses on accelerator nodes: tasks that need no card and prefer plain nodes."""
    return PLAIN_NODE_PENALTY if defaults.prefers_plain_nodes and cards == 0 else 0.0
