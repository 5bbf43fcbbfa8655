"""Per-model job timing from measurements (issue 53): what a model's communication share is on n nodes
and how much faster it runs on a newer card, read from measured step times instead of assumed.

- **Communication share by node count** (Pollux's placements, Qiao et al., OSDI 2021): for each
  measured step, ``sync_time / step_time`` — the share of a step spent synchronising gradients; per
  node count the median over the measured steps (every GPUs-per-node and local batch size measured
  with that many nodes); node counts not measured in between take the straight line between their
  measured neighbours, beyond the largest the largest's. One node exchanges nothing between nodes: 0.
- **Speed on a newer card** (Gavel's throughputs, Narayanan et al., OSDI 2020): the median over a
  model's measured batch sizes of ``throughput(newer) / throughput(reference)`` on one card. It is not
  one constant: measured ratios run from below 1 (a newer card slower for that model) to nearly 2.

Arrays in, arrays out; no files (streams/replay/models.py reads them).
"""

from __future__ import annotations

import numpy as np


def shares_by_nodes(nodes, sync_s, step_s, max_nodes: int) -> np.ndarray:
    """float64[max_nodes + 1]: the communication share at 0..max_nodes nodes (index = node count) from
    measured steps (``nodes`` int[R] nodes the step ran on, ``sync_s`` and ``step_s`` float[R] its
    synchronisation and whole step, seconds). Index 0 and 1 are 0; a count between two measured ones
    is interpolated, one beyond the largest measured takes the largest's, one below the smallest
    measured (of at least 2) the smallest's; NaN everywhere from 2 when no step of 2+ nodes is
    measured. Steps with ``step_s`` <= 0 or non-finite values are left out.

    Worked: steps on 2 nodes with shares 0.2, 0.4, 0.6 (median 0.4) and on 4 nodes 0.5, 0.7 (median
    0.6), max_nodes 6 -> [0, 0, 0.4, 0.5, 0.6, 0.6, 0.6]."""
    nodes = np.asarray(nodes, np.int64)
    sync_s, step_s = np.asarray(sync_s, np.float64), np.asarray(step_s, np.float64)
    out = np.zeros(max_nodes + 1)
    ok = np.isfinite(sync_s) & np.isfinite(step_s) & (step_s > 0) & (nodes >= 2)
    if max_nodes < 2:
        return out
    if not ok.any():
        out[2:] = np.nan
        return out
    share = sync_s[ok] / step_s[ok]
    counts = np.unique(nodes[ok])
    medians = np.array([np.median(share[nodes[ok] == n]) for n in counts.tolist()])
    out[2:] = np.interp(
        np.arange(2, max_nodes + 1), counts, medians
    )  # np.interp holds the ends flat
    return out


def speed_ratio(newer, reference) -> float:
    """The median over measured batch sizes of ``newer / reference`` throughput (float[B] each, the
    same batch sizes in the same order); pairs with a non-positive or non-finite value are left out;
    NaN when none is left. Worked: [10, 30, 16] over [10, 20, 8] -> median(1.0, 1.5, 2.0) = 1.5."""
    a, b = np.asarray(newer, np.float64), np.asarray(reference, np.float64)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    return float(np.median(a[ok] / b[ok])) if ok.any() else float("nan")


def shares_at(table: np.ndarray, model, nodes) -> np.ndarray:
    """float64[J]: each job's communication share from ``table`` (float64[M, max_nodes + 1],
    :func:`shares_by_nodes` per model) for its ``model`` (int[J] rows) on ``nodes`` (int[J]; beyond the
    table's largest count, the largest's; 0 on one node)."""
    table = np.asarray(table, np.float64)
    n = np.clip(np.asarray(nodes, np.int64), 0, table.shape[1] - 1)
    return np.where(np.asarray(nodes) > 1, table[np.asarray(model, np.int64), n], 0.0)
