"""The alpha a task is scored with: an explicit alpha on the task wins, then its parallelism
strategy's, then its type's default (core.vocabulary; learned defaults replace the built-in ones)."""

from __future__ import annotations

from core.vocabulary import DEFAULT_TYPES, PLAIN_NODE_PENALTY, STRATEGY_ALPHA, TypeDefaults


def task_alpha(task_type: str, explicit: float | None = None, strategy: str | None = None,
               types: dict[str, TypeDefaults] = DEFAULT_TYPES) -> float:
    """The alpha a task is scored with: explicit, else its strategy's, else its type's."""
    if explicit is not None:
        return float(explicit)
    by_strategy = STRATEGY_ALPHA.get(strategy or "")
    if by_strategy is not None:
        return min(by_strategy, types[task_type].alpha)
    return types[task_type].alpha


def accel_penalty(defaults: TypeDefaults, cards: int) -> float:
    """Points a task loses on accelerator nodes: tasks that need no card and prefer plain nodes."""
    return PLAIN_NODE_PENALTY if defaults.prefers_plain_nodes and cards == 0 else 0.0
