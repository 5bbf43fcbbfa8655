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


def like_completed(limits, completed, shape, seed: int) -> np.ndarray:
    """float64[J]: ``limits`` with each job that did not complete (``completed`` False: it failed or was
    killed) given the limit of a completed job drawn at random among those of its ``shape`` (any
    hashable per job: nodes x cards), or among all completed jobs when none has its shape, raised to
    its own limit where that is higher. A user asks for a limit before knowing the job will fail: a
    failing job's own limit must not come from its time to failure, or the queue would learn which jobs
    die early; but a job past its limit is killed, so one that ran longer than the drawn limit asked
    for at least what it ran (its own limit) — a limit is never below the run. Drawn reproducibly from
    ``seed``; unchanged when no job, or every job, completed."""
    limits = np.asarray(limits, np.float64).copy()
    done = np.asarray(completed, bool)
    if done.all() or not done.any():
        return limits
    rng = np.random.default_rng(seed)
    keys = np.asarray(shape)
    pool = {}
    for j in np.flatnonzero(done).tolist():
        pool.setdefault(keys[j].item(), []).append(j)
    every = np.flatnonzero(done)
    for j in np.flatnonzero(~done).tolist():
        same = pool.get(keys[j].item())
        src = same if same else every
        limits[j] = max(limits[src[int(rng.integers(len(src)))]], limits[j])
    return limits


def predicted_runs(estimates, last_ratios) -> np.ndarray:
    """float64[T]: each task's predicted run time — its user's own ``estimates`` (float64[T]) times the
    mean ratio of run time to estimate over the user's last runs (``last_ratios`` float64[T, k], NaN
    where there is none), never more than the estimate; the estimate where the user has no run yet.
    Which runs and how many are those of Tsafrir, Etsion & Feitelson ("Backfilling using
    system-generated predictions rather than user runtime estimates", IEEE TPDS 2007: the last two);
    scaling the new request by how much of their requests the user's last runs used, rather than
    taking the runs' mean, is cnsched's: a user who asks for four hours and used a tenth of it twice
    is planned at 24 min, whatever those runs' own length — and a user whose runs fail early is
    planned short. Worked: estimate 3,600 s, ratios 1/6 and 5/18 -> 800; estimate 7,200 s, the same
    ratios -> 1,600; ratios 1.4 and 2.5 -> 3,600; none -> 3,600."""
    est = np.asarray(estimates, np.float64)
    ratios = np.asarray(last_ratios, np.float64)
    ratios = ratios.reshape(est.size, ratios.shape[-1] if ratios.ndim > 1 else -1)
    known = np.isfinite(ratios)
    counts = known.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(known, ratios, 0.0).sum(axis=1) / counts
    return np.where(counts > 0, est * np.minimum(mean, 1.0), est)
