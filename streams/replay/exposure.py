"""Which running jobs a labelled change reaches (issue 53's E5): a step of the network's series at a
labelled change point (streams/replay/dynamics.py) flags every job running then on a path through it — a gang with members on both sides of a rack's uplink, or members at both sites of a
site pair — as "after a change" (``Outcome.hit``): the jobs whose windows after a change point the
moves are for. The report pairs a job flagged under either policy of a comparison (stats.py), so both
are judged on the same jobs."""

from __future__ import annotations

import numpy as np


def mark_hits(hit: np.ndarray, cluster, uplinks: bool, first: int, end: int, running: dict, rack: np.ndarray) -> None:
    """Flag in ``hit`` (bool[J]) the jobs of ``running`` ({job: Run}) a change point in rows ``first:end`` of
    ``cluster.uplinks`` (``uplinks``) or ``cluster.series`` reaches; ``rack``: each node's rack, site-major."""
    series = cluster.uplinks if uplinks else cluster.series
    if series is None or series.change is None or not series.change[first:end].any():
        return
    rows = first + np.flatnonzero(series.change[first:end])
    for j, r in running.items():
        if len(r.members) < 2 or hit[j]:
            continue
        if uplinks:
            where = rack[r.members]
            crossed = [g for g in set(where.tolist()) if (where != g).any()]
            hit[j] = bool(np.isin(series.rack[rows], crossed).any())
        else:
            sites = set(cluster.node_site[r.members].tolist())
            hit[j] = any(int(series.src[i]) in sites and int(series.dst[i]) in sites for i in rows.tolist())
