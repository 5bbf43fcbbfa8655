"""Alphas learned from finished tasks (core.alpha over sinks.queries.finished_tasks): per task type
the alpha that best ranks its tasks' achieved throughput, and whether enough tasks back it to
replace the built-in default (CNSCHED_ALPHA_MIN_TASKS)."""

from __future__ import annotations

import math

import numpy as np

from core.alpha import learn_alpha
from core.vocabulary import TYPE_ALPHAS
from sinks.duckdb_store import DuckStore
from sinks.queries import finished_tasks

ALPHA_COLUMNS = ("task_type", "tasks", "default_alpha", "learned_alpha", "spearman", "in_use")


def learned_alphas(con, defaults: dict[str, float] | None = None, min_tasks: int = 50) -> list[dict]:
    """Per task type with finished tasks: the learned alpha, its rank correlation, how many tasks,
    and whether there are enough (``min_tasks``) to use it as the type's default (``defaults``:
    alphas before learning, the built-in ones unless given)."""
    defaults = TYPE_ALPHAS if defaults is None else defaults
    rows = finished_tasks(con)
    by_type: dict[str, list[tuple]] = {}
    for r in rows:
        by_type.setdefault(r[0], []).append(r[1:])
    out = []
    for task_type, items in sorted(by_type.items()):
        c, n, y = (np.array(col, dtype=np.float64) for col in zip(*items, strict=True))
        default = defaults.get(task_type, 0.5)
        alpha, rho = learn_alpha(c, n, y, default=default)
        out.append({"task_type": task_type, "tasks": len(items), "default_alpha": default, "learned_alpha": alpha,
                    "spearman": None if math.isnan(rho) else round(rho, 4),
                    "in_use": len(items) >= min_tasks and not math.isnan(rho)})
    return out


def load_learned_alphas(path, min_tasks: int, timeout_s: float = 5.0) -> list[dict]:
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        return learned_alphas(store.con, min_tasks=min_tasks)
