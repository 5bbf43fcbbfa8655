"""The headline of a replay, held to a reviewer's standard: each policy against each baseline, per job
kind, with completion time, wait and run time apart.

- Kinds: ``gang`` (several nodes), ``data`` (one node, data to load from a site), ``other`` (one node,
  nothing to load), ``all``; where the network's series label rises (issue 53's E5), also ``changed``
  (the gangs a labelled change point reached on a path they used while they ran, under either policy of the
  comparison: the windows after a change point, streams/replay/exposure.py) and ``steady`` (the rest).
- Which jobs count: the ones the trace says completed (Philly ``Pass``; a failed or killed job still
  runs and holds its cards for its trace time, stretched like work — a job that fails at step k
  fails later on a slower placement — but a completion time of work that did not complete is not a
  figure of merit), finished under both policies of the comparison, paired by job.
- The change is per seed: ``mean(policy) / mean(baseline) - 1``; the estimate is its mean over seeds
  with a 95 % Student-t interval over seeds (core/intervals.py; none with one seed). Beside it, pooled
  over seeds: both means, medians and p95s; the median of the paired per-job ratios (for wait, whose
  zero has no ratio, and load, the median paired difference in seconds); and the ten jobs with the largest
  differences' share of all the jobs' absolute differences (a mean carried by a few jobs shows here).
"""

from __future__ import annotations

import math

import numpy as np

from core.intervals import t_interval
from streams.replay.jobs import SimJobs

KINDS = ("gang", "data", "other", "all")
EXPOSURE = ("changed", "steady")  # issue 53's E5: where a labelled change point reached the job (either policy) or not
METRICS = ("jct", "wait", "run", "load")  # load: data jobs only (the others load nothing)
HEADLINE_BASELINES = ("topology", "compute-only")
MOVES_BASELINE = "ours-static"  # where it ran beside: ours against it is what the moves (the detector's alarms) add


def kind_mask(jobs: SimJobs, kind: str) -> np.ndarray:
    gang = jobs.nodes > 1
    data = ~gang & (jobs.home >= 0)
    return {"gang": gang, "data": data, "other": ~gang & ~data}.get(kind, np.ones(len(jobs), bool))


def exposure_mask(kind: str, a, b) -> np.ndarray | bool:
    """``changed``: jobs a labelled change point reached under either outcome; ``steady``: the others; else all."""
    if kind not in EXPOSURE:
        return True
    hit = _hits(a) | _hits(b)
    return hit if kind == "changed" else ~hit


def _hits(o) -> np.ndarray:
    return o.hit if getattr(o, "hit", None) is not None else np.zeros(o.end.size, bool)


def exposed(run) -> bool:
    """Whether any job of the run met a labelled change point (the E5 kinds are reported then)."""
    return any(_hits(o).any() for o in run.outcomes.values())


def metric(jobs: SimJobs, o, name: str) -> np.ndarray:
    """float64[J] seconds: jct (end - submit), wait (first start - submit), run (end - first start) or
    load (its data loads beyond the ideal bandwidth's time, summed over its starts)."""
    if name == "load":
        load = getattr(o, "load_s", None)
        return load if load is not None else np.zeros(len(jobs))
    if name == "jct":
        return o.end - jobs.submit
    if name == "wait":
        return o.start - jobs.submit
    return o.end - o.start


def compare(run, policy: str, base: str, kind: str, name: str) -> dict | None:
    """One headline row (see the module), or None when no job of the kind counts in any seed."""
    per_seed, a_all, b_all, shares = [], [], [], []
    for seed in run.seeds:
        jobs, a, b = run.jobs[seed], run.outcomes[(policy, seed)], run.outcomes[(base, seed)]
        m = kind_mask(jobs, kind) & exposure_mask(kind, a, b) & jobs.completed & np.isfinite(a.end) & np.isfinite(b.end)
        va, vb = metric(jobs, a, name)[m], metric(jobs, b, name)[m]
        if not va.size:
            continue
        per_seed.append(va.mean() / vb.mean() - 1 if vb.mean() > 0 else np.nan)
        d = np.abs(va - vb)
        total = d.sum()
        top = np.sort(d)[::-1][:10].sum()
        shares.append(top / total if total > 0 else np.nan)
        a_all.append(va)
        b_all.append(vb)
    if not a_all:
        return None
    est, lo, hi = t_interval(per_seed)
    # a time cannot fall by more than all of it: a t-interval of few, spread seeds can reach below -100 %,
    # where it says only "uncertain"; its lower bound is held at -100 %
    lo = max(lo, -1.0) if not math.isnan(lo) else lo
    a, b = np.concatenate(a_all), np.concatenate(b_all)
    if name in ("wait", "load"):
        paired = float(np.median(a - b))
    else:
        ok = b > 0
        paired = float(np.median(a[ok] / b[ok])) if ok.any() else np.nan
    qa, qb = np.percentile(a, [50, 95]), np.percentile(b, [50, 95])
    return {"policy": policy, "against": base, "kind": kind, "metric": name, "change": est, "ci_low": lo,
            "ci_high": hi, "seeds": len(per_seed), "jobs": int(round(a.size / len(per_seed))),
            "mean_policy_s": float(a.mean()), "mean_against_s": float(b.mean()),
            "p50_policy_s": float(qa[0]), "p50_against_s": float(qb[0]), "p95_policy_s": float(qa[1]),
            "p95_against_s": float(qb[1]), "paired_median": paired, "top10_share": _nan_mean(shares)}


def headline(run, baselines=(*HEADLINE_BASELINES, MOVES_BASELINE)) -> list[dict]:
    """Every policy against every baseline present, per kind and metric."""
    out = []
    for base in baselines:
        if base not in run.policies:
            continue
        for p in run.policies:
            if p == base:
                continue
            for kind in KINDS + (EXPOSURE if exposed(run) else ()):
                for name in METRICS:
                    if name == "load" and kind != "data":
                        continue
                    row = compare(run, p, base, kind, name)
                    if row is not None:
                        out.append(row)
    return out


def _nan_mean(x: list) -> float:
    a = np.array(x, np.float64)
    return float(np.nanmean(a)) if np.isfinite(a).any() else float("nan")


def excluded(run) -> dict[str, int]:
    """Jobs per seed left out of the headline because the trace says they did not complete."""
    seed = run.seeds[0]
    return {"not_completed": int((~run.jobs[seed].completed).sum())}
