"""Reservations for the head of the queue, from the running tasks' expected ends (EASY backfilling:
Lifka 1995; Mu'alem and Feitelson 2001). Arrays in, arrays out.

The task at the head of the queue that finds no room is promised the nodes that free first: per node,
the earliest time its free room plus what the running tasks there release by then covers the task's
need; a gang of ``peers`` takes the ``peers`` earliest nodes, and starts when the last of them frees.
A later task may be placed before it (backfill) only where it cannot delay it: off the reserved nodes,
or on them if it ends before the reservation starts.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from core.feasibility import covers


def node_free_times(need: np.ndarray, usable: np.ndarray, feasible: np.ndarray, release_node: np.ndarray,
                    release_at: np.ndarray, release: np.ndarray, now: float) -> np.ndarray:
    """float[N]: when each node first has room for ``need`` (float[R]): ``now`` if it has already,
    else the expected end of the running task whose release makes it fit (``release_node`` int[M],
    ``release_at`` float[M], ``release`` float[M, R] what each running task gives back on that node);
    inf where it never does or the node is not ``feasible``."""
    need = np.asarray(need, np.float64)
    usable = np.asarray(usable, np.float64)
    n = usable.shape[0]
    out = np.full(n, np.inf)
    fits_now = covers(usable, need)
    out[fits_now] = now
    release_node = np.asarray(release_node, np.int64)
    release_at = np.maximum(np.asarray(release_at, np.float64), now)
    release = np.asarray(release, np.float64).reshape(release_node.size, need.size)
    order = np.lexsort((release_at, release_node))  # by node, then time
    _release_in_order(out, usable.copy(), need, release_node, release_at, release, order)
    return np.where(np.asarray(feasible, bool), out, np.inf)


@nb.njit(cache=True)
def _release_in_order(out, room, need, release_node, release_at, release, order):
    """Each node's room grows by its releases in time order until it covers ``need``: then ``out``
    holds that release's time (a node that fits already is skipped)."""
    for m in order:
        k = release_node[m]
        if np.isfinite(out[k]):
            continue
        ok = True
        for r in range(need.size):
            room[k, r] += release[m, r]
            ok = ok and room[k, r] >= need[r]
        if ok:
            out[k] = release_at[m]


def reserve(free_at: np.ndarray, peers: int) -> tuple[float, list[int]] | None:
    """(start, nodes): the ``peers`` nodes that free first (ties: lower index) and when the last of
    them does; None when fewer than ``peers`` nodes ever free."""
    free_at = np.asarray(free_at, np.float64)
    order = np.lexsort((np.arange(free_at.size), free_at))[:peers]
    if order.size < peers or not np.isfinite(free_at[order]).all():
        return None
    return float(free_at[order].max()), sorted(order.tolist())


def held_back(start: float, now: float, duration_s: float | np.ndarray) -> bool | np.ndarray:
    """Whether a backfilled task of ``duration_s`` must keep off the reserved nodes: it would not end
    by the reservation's ``start`` (a bool for one duration, bool[T] for an array of them)."""
    return now + duration_s > start


def blocks(reserved: np.ndarray, start: float, now: float, duration_s: float) -> np.ndarray:
    """bool[N]: the reserved nodes a backfilled task of ``duration_s`` may not use — all of them
    unless it ends by the reservation's start."""
    reserved = np.asarray(reserved, bool)
    return reserved if held_back(start, now, duration_s) else np.zeros_like(reserved)
