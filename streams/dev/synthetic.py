"""Synthetic scheduling states for benchmarks and tests (deterministic for a seed)."""

from __future__ import annotations

import numpy as np

from core.scoring import ScoringInputs


def synthetic_inputs(jobs: int, nodes: int, endpoints: int = 256, seed: int = 0,
                     endpoints_per_job: int = 3) -> ScoringInputs:
    rng = np.random.default_rng(seed)
    n, j, e = nodes, jobs, max(1, endpoints)
    classes = rng.integers(0, 4, n)
    cards = np.where(classes == 3, 0, rng.choice([4, 8], n))
    usable = np.stack([cards * rng.uniform(0, 1, n), cards * 80 * rng.uniform(0, 1, n), rng.uniform(64, 1024, n)], axis=1)
    quality = rng.uniform(0, 100, (e, n)).astype(np.float32)
    quality[rng.random((e, n)) < 0.01] = np.nan
    per_job = rng.integers(0, endpoints_per_job + 1, j)
    ep_ptr = np.concatenate([[0], np.cumsum(per_job)])
    need_cards = rng.choice([0, 1, 2, 4, 8], j)
    return ScoringInputs(
        compute=rng.uniform(0, 100, (n, 3)).astype(np.float32),
        usable=usable.astype(np.float32),
        available=rng.random(n) > 0.02,
        node_class=classes.astype(np.int64),
        has_accel=cards > 0,
        node_quality=rng.uniform(0, 100, n).astype(np.float32),
        quality=quality,
        bandwidth_gbps=rng.uniform(1, 400, (e, n)).astype(np.float32),
        kind=rng.integers(0, 3, j).astype(np.int64),
        alpha=rng.uniform(0, 1, j).astype(np.float32),
        need=np.stack([need_cards, need_cards * 20.0, rng.uniform(8, 256, j)], axis=1).astype(np.float32),
        class_mask=np.where(rng.random(j) < 0.3, 1 << rng.integers(0, 4, j), 0).astype(np.int64),
        ep_ptr=ep_ptr.astype(np.int64),
        ep_idx=rng.integers(0, e, int(ep_ptr[-1])).astype(np.int64),
        data_ep=np.where(rng.random(j) < 0.5, rng.integers(0, e, j), -1).astype(np.int64),
        data_gb=rng.choice([0.0, 10.0, 200.0], j).astype(np.float32),
        accel_penalty=np.where(need_cards == 0, 20.0, 0.0).astype(np.float32),
    )
