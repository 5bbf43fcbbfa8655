"""The one feasibility rule: whether a node has room for a task.

A node can take a task when it is available and, in every resource (cards, accelerator memory GB,
host memory GB), what it may still give out covers what the task needs on it. What it may give out
(``usable``) is the scheduler's books bounded by the node's own fresh report, in whole cards
(streams.worker.scheduling.ledger.usable): so a task fits a node exactly when the node's free whole
cards, books and report agreeing, cover it. Placement, moves, the queue's retries, the head's
reservation and backfill, constraints and preemption all ask here; the scoring kernel applies the same
comparison inside its loop (core.scoring, ``NO_CARDS`` and the memory reasons), and a test holds the
two together.
"""

from __future__ import annotations

import numpy as np


def covers(usable: np.ndarray, need: np.ndarray) -> np.ndarray:
    """bool: where ``usable`` (float[..., R]) covers ``need`` (float[R], or float[J, 1, R] against
    float[N, R] for many tasks at once) in every resource."""
    usable, need = np.asarray(usable), np.asarray(need)
    if need.shape[-1] and usable.shape[-1] == need.shape[-1]:  # a resource at a time (R is small): no [..., R] temporary
        ok = usable[..., 0] >= need[..., 0]
        for r in range(1, need.shape[-1]):
            ok &= usable[..., r] >= need[..., r]
        return ok
    return np.all(usable >= need, axis=-1)


def fitting(usable: np.ndarray, need: np.ndarray, available: np.ndarray | None = None) -> np.ndarray:
    """bool[N]: the nodes with room for one worker needing ``need`` (float[R]) — available, and
    covered in every resource."""
    ok = covers(usable, need)
    return ok if available is None else ok & np.asarray(available, bool)
