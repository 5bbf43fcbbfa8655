"""Node failures from what the scheduler already sees: compute reports and path windows.

A node has failed when its reports stopped (older than the timeout), it reports itself down, or every
known path touching it lost (nearly) all its probes. Where the failure lies:
- ``compute``: the node is silent or down while its paths still carry probes (the network reaches it);
- ``network``: the node reports itself up and in time, but every path touching it is lost;
- ``both``: silent or down, and every path touching it is lost too;
- ``unknown``: silent or down, and no path touching it is known (nothing to tell them apart).
Arrays in, arrays out; the caller keeps incidents over time.
"""

from __future__ import annotations

import numpy as np

COMPUTE, NETWORK, BOTH, UNKNOWN = "compute", "network", "both", "unknown"
LOST_LOSS = 0.95  # a path whose loss reaches this carries (almost) nothing


def paths_lost(path_nodes: np.ndarray, path_loss: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(known paths per node, of them lost) — ``path_nodes[P, 2]``: the two node rows a path touches
    (-1 where an end is not a node), ``path_loss[P]``: its loss (NaN unknown: not counted)."""
    known = np.zeros(n_nodes, np.int64)
    lost = np.zeros(n_nodes, np.int64)
    ok = ~np.isnan(path_loss)
    is_lost = ok & (path_loss >= LOST_LOSS)
    for end in (0, 1):
        rows = path_nodes[:, end]
        sel = ok & (rows >= 0)
        known += np.bincount(rows[sel], minlength=n_nodes)
        lost += np.bincount(rows[sel & is_lost], minlength=n_nodes)
    return known, lost


def node_failures(report_age_s: np.ndarray, reported_down: np.ndarray, timeout_s: float, known_paths: np.ndarray,
                  lost_paths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(failed bool[N], cause object[N]: "" where not failed) — see the module's rules."""
    silent = np.asarray(report_age_s, np.float64) > timeout_s
    compute_bad = silent | np.asarray(reported_down, bool)
    known = np.asarray(known_paths)
    network_bad = (known > 0) & (np.asarray(lost_paths) >= known)
    failed = compute_bad | network_bad
    if not failed.any():  # the usual case, asked at every window: no causes to spell out
        return failed, np.full(failed.shape, "", object)
    cause = np.where(~failed, "", np.where(compute_bad & network_bad, BOTH, np.where(
        network_bad, NETWORK, np.where(known > 0, COMPUTE, UNKNOWN))))
    return failed, cause.astype(object)
