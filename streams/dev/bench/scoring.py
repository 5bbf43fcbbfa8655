"""`cnsched bench scoring`: full rescoring of J x N pairs by the numba kernel, beside the numpy
reference and a plain-Python per-pair loop (subsampled, extrapolated), and the kernel with its
network part (what the scheduler calls)."""

from __future__ import annotations

import time

import numpy as np


def _python_pair(x, j: int, n: int) -> float:
    """One job x node pair in plain Python: the baseline of `cnsched bench scoring`."""
    import math as m

    if not x.available[n] or any(float(x.usable[n, r]) < float(x.need[j, r]) for r in range(3)):
        return float("-inf")
    mask = int(x.class_mask[j])
    if mask and not (mask >> int(x.node_class[n])) & 1:
        return float("-inf")
    eps = x.ep_idx[x.ep_ptr[j]:x.ep_ptr[j + 1]]
    if len(eps) == 0:
        net = float(x.node_quality[n])
        net = x.unknown_quality if m.isnan(net) else net
    else:
        vals = [float(x.quality[e, n]) for e in eps]
        net = sum(x.unknown_quality if m.isnan(v) else v for v in vals) / len(vals)
    a = float(x.alpha[j])
    v = a * float(x.compute[n, x.kind[j]]) + (1 - a) * net
    d = int(x.data_ep[j])
    if d >= 0 and x.data_gb[j] > 0:  # the data load time: a factor of its own
        bw = float(x.bandwidth_gbps[d, n])
        u = 0.0
        if bw > 0:
            span = m.log(x.load_bad_s) - m.log(x.load_good_s)
            u = min(max((m.log(x.load_bad_s) - m.log(x.data_gb[j] * 8 / bw)) / span, 0.0), 1.0) * 100
        v = (1 - x.load_weight) * v + x.load_weight * u
    v -= float(x.accel_penalty[j]) if x.has_accel[n] else 0.0
    return min(max(v, 0.0), 100.0)


def bench_scoring(jobs: int, nodes: int, endpoints: int = 1000, seed: int = 0) -> dict:
    from core.scoring import score_all, score_parts, score_reference
    from streams.dev.synthetic import synthetic_inputs

    x = synthetic_inputs(jobs, nodes, endpoints, seed)
    small = synthetic_inputs(4, 8, 4, seed)
    score_all(small)  # compile outside the timing
    score_parts(small)
    full_s = float("inf")
    out = None
    for _ in range(3):  # best of three: the machine is shared
        t = time.perf_counter()
        out = score_all(x)
        full_s = min(full_s, time.perf_counter() - t)
    pairs = jobs * nodes
    # numpy reference on a subsample of jobs, extrapolated
    sub_jobs = max(1, min(jobs, 200))
    xs = synthetic_inputs(sub_jobs, nodes, endpoints, seed)
    t = time.perf_counter()
    score_reference(xs)
    numpy_rate = sub_jobs * nodes / (time.perf_counter() - t)
    # plain Python per pair on a subsample of pairs, extrapolated
    rng = np.random.default_rng(seed)
    sample = list(zip(rng.integers(0, jobs, 20_000).tolist(), rng.integers(0, nodes, 20_000).tolist(), strict=True))
    t = time.perf_counter()
    for j, n in sample:
        _python_pair(x, j, n)
    python_rate = len(sample) / (time.perf_counter() - t)
    # what the scheduler calls: the composite and its network part
    del out
    t = time.perf_counter()
    score_parts(x)
    parts_s = time.perf_counter() - t
    return {
        "jobs": jobs, "nodes": nodes, "endpoints": endpoints, "pairs": pairs,
        "numba_full_rescore_s": full_s,
        "numba_pairs_per_s": pairs / full_s,
        "numpy_pairs_per_s": numpy_rate,
        "python_pairs_per_s": python_rate,
        "numba_parts_s": parts_s,
        "ratio_numba_vs_numpy": pairs / full_s / numpy_rate,
        "ratio_numba_vs_python": pairs / full_s / python_rate,
        "python_full_rescore_s_extrapolated": pairs / python_rate,
    }
