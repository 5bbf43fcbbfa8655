"""How network-sensitive each task type is: its default alpha, network profile, compute class.

alpha weighs compute against network in ``alpha x compute + (1 - alpha) x network``: data-parallel
training exchanges gradients every step (small alpha: the network matters most); a single-card
inference service is bound by its card (large alpha). An explicit alpha on a task wins.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TypeDefaults:
    alpha: float
    profile: str  # network profile of core/quality.py
    kind: str  # compute class of core/metering.py
    prefers_plain_nodes: bool = False  # when it needs no accelerator


DEFAULT_TYPES: dict[str, TypeDefaults] = {
    "training-data-parallel": TypeDefaults(0.2, "bandwidth", "training"),
    "training-model-parallel": TypeDefaults(0.3, "latency", "training"),
    "fine-tune": TypeDefaults(0.5, "balanced", "training"),
    "inference": TypeDefaults(0.8, "latency", "inference"),
    "data-intensive": TypeDefaults(0.3, "bandwidth", "generic"),
    "preprocessing": TypeDefaults(0.6, "bandwidth", "generic", prefers_plain_nodes=True),
    "batch-analytics": TypeDefaults(0.6, "balanced", "generic", prefers_plain_nodes=True),
}

# a data-parallel strategy declared on another type makes it as sensitive as data-parallel training
STRATEGY_ALPHA = {"data-parallel": 0.2, "model-parallel": 0.3, "pipeline": 0.3, "single": None}


def task_alpha(task_type: str, explicit: float | None = None, strategy: str | None = None,
               types: dict[str, TypeDefaults] = DEFAULT_TYPES) -> float:
    """The alpha a task is scored with: explicit, else its strategy's, else its type's."""
    if explicit is not None:
        return float(explicit)
    by_strategy = STRATEGY_ALPHA.get(strategy or "")
    if by_strategy is not None:
        return min(by_strategy, types[task_type].alpha)
    return types[task_type].alpha
