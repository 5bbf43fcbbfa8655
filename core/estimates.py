"""Run-time estimates a cluster has when a job is submitted — never the run time itself.

:func:`requested_limits` is the limit a user asks for (Slurm's ``--time``): the run time times a
factor drawn uniformly in ``[1, f]`` per job (the f-model of Mu'alem & Feitelson, "Utilization,
predictability, workloads, and user runtime estimates in scheduling the IBM SP2 with backfilling",
IEEE TPDS 2001), rounded up to the round values users pick (Tsafrir, Etsion & Feitelson, "Modeling
user runtime estimates", JSSPP 2005: a few values — 15 min, 1 h, 4 h, 1 day, … — cover most
requests). A limit is never below the run time (a job past its limit is killed, so the trace's jobs
asked for at least what they ran).
"""

from __future__ import annotations

import numpy as np

LADDER_MIN = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 600, 720, 960, 1080, 1440, 2160, 2880,
              4320, 5760, 7200, 10080)  # minutes; beyond a week, whole days
_LADDER_S = np.array(LADDER_MIN, np.float64) * 60.0


def requested_limits(run_s, factor) -> np.ndarray:
    """float64[J]: ``run_s x factor`` rounded up to the next round value of :data:`LADDER_MIN` (past
    the last, to whole days); NaN stays NaN."""
    want = np.asarray(run_s, np.float64) * np.asarray(factor, np.float64)
    i = np.searchsorted(_LADDER_S, np.nan_to_num(want, nan=0.0), side="left")
    days = np.ceil(want / 86400.0) * 86400.0
    out = np.where(i < _LADDER_S.size, _LADDER_S[np.minimum(i, _LADDER_S.size - 1)], days)
    return np.where(np.isnan(want), np.nan, out)


def limit_factors(n_jobs: int, f: float, seed: int) -> np.ndarray:
    """Each job's over-request factor, uniform in ``[1, f]``, drawn reproducibly from ``seed``."""
    if f < 1:
        raise ValueError("the limit factor f must be at least 1")
    return np.random.default_rng(seed).uniform(1.0, f, n_jobs)
