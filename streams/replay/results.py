"""A replay's results: every policy on every seed over identical inputs; summaries per policy and
job class (network-sensitive, other) and the change against compute-only and topology-packing with
bootstrap confidence intervals over seeds (over jobs, paired, when there is one seed)."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

import numpy as np

from streams.replay.cluster import Cluster
from streams.replay.dynamics import rtt_dynamics, uplink_dynamics
from streams.replay.engine import POLICIES, Outcome, Replay
from streams.replay.jobs import SimJobs, sim_jobs
from streams.replay.traces import JobTrace
from streams.replay.world import SimConfig, network_events

CLASSES = ("sensitive", "other", "all")
BASELINES = ("compute-only", "topology")


@dataclass
class ReplayRun:
    config: SimConfig
    trace: str
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    jobs: dict[int, SimJobs]  # per seed
    outcomes: dict[tuple[str, int], Outcome]
    wall_s: dict[tuple[str, int], float]
    sites: dict[int, list[str]] = field(default_factory=dict)  # per seed (they differ with regions drawn per seed)


def replay(trace: JobTrace, cluster: Cluster, cfg: SimConfig, policies=POLICIES, seeds=(0,), progress=None,
           tick=None, rtt_series: list | None = None, workers: int = 1) -> ReplayRun:
    """Every policy over every seed. ``progress(policy, seed, wall_s)`` after each run; ``tick(n)``
    as jobs end within one (with ``workers`` > 1, when a run ends). ``rtt_series``
    (streams.analytics.rtt_series.LabelledSeries): real RTT series that drive every site pair over
    time, assigned by seed (streams/replay/dynamics.py). ``workers``: runs at once, in processes
    (each run is independent and seeded: the results do not depend on it)."""
    outcomes, walls, jobs, runs, sites = {}, {}, {}, [], {}
    for seed in seeds:
        c = replace(cfg, seed=seed)
        seeded = cluster.seeded(seed)  # ties between equal sites fall by the seed, not by name
        sites[seed] = seeded.sites
        jobs[seed] = sim_jobs(trace, seeded, c)
        horizon = float(jobs[seed].submit.max() + 3 * jobs[seed].ideal.max()) if len(trace) else 0.0
        if rtt_series:
            seeded = replace(seeded, series=rtt_dynamics(seeded.rtt_ms, rtt_series, horizon, seed))
            if c.uplink_dynamics:
                racks = len(seeded.sites) * seeded.spec.racks_per_site
                seeded = replace(seeded, uplinks=uplink_dynamics(racks, rtt_series, horizon, seed))
        events = network_events(c, len(cluster.sites), len(cluster.node_ids), horizon)
        runs += [(p, seed, jobs[seed], seeded, c, events) for p in policies]

    def done(p: str, seed: int, outcome: Outcome, wall: float) -> None:
        outcomes[(p, seed)], walls[(p, seed)] = outcome, wall
        if progress is not None:
            progress(p, seed, wall)

    if workers <= 1 or len(runs) <= 1:
        for p, seed, *rest in runs:
            done(p, seed, *_one(p, seed, *rest, tick=tick))
    else:
        with ProcessPoolExecutor(min(workers, len(runs)), mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_one, *r): r[:2] for r in runs}
            for f in as_completed(futures):
                p, seed = futures[f]
                done(p, seed, *f.result())
                if tick is not None:
                    tick(len(trace))
    return ReplayRun(cfg, trace.source, tuple(policies), tuple(seeds), jobs,
                     {(p, seed): outcomes[(p, seed)] for seed in seeds for p in policies}, walls, sites)


def _one(policy: str, seed: int, jobs: SimJobs, cluster: Cluster, cfg: SimConfig, events: list,
         tick=None) -> tuple[Outcome, float]:
    t = time.perf_counter()
    out = Replay(jobs, cluster, cfg, policy, events).run(tick)
    return out, time.perf_counter() - t


def _mask(jobs: SimJobs, cls: str) -> np.ndarray:
    return jobs.sensitive if cls == "sensitive" else (~jobs.sensitive if cls == "other" else np.ones(len(jobs), bool))


def job_table(run: ReplayRun) -> list[dict]:
    """One row per (policy, seed, job)."""
    rows = []
    for (p, seed), o in run.outcomes.items():
        jobs = run.jobs[seed]
        for j in range(len(jobs)):
            rows.append({"policy": p, "seed": seed, "job": j, "class": "sensitive" if jobs.sensitive[j] else "other",
                         "nodes": int(jobs.nodes[j]), "cards": int(jobs.cards[j]), "submit_s": float(jobs.submit[j]),
                         "start_s": _f(o.start[j]), "end_s": _f(o.end[j]), "jct_s": _f(o.end[j] - jobs.submit[j]),
                         "wait_s": _f(o.start[j] - jobs.submit[j]), "state": o.state[j], "reason": o.reason[j],
                         "migrations": int(o.migrations[j]), "migration_s": float(o.migration_s[j]),
                         "restarts": int(o.restarts[j]),
                         "load_s": float(o.load_s[j]) if o.load_s is not None else 0.0})
    return rows


def _f(v) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def summary(run: ReplayRun, cards_total: int) -> list[dict]:
    """Per policy and class, pooled over seeds."""
    out = []
    for p in run.policies:
        for cls in CLASSES:
            jct, wait, mig, mig_s, restarts, fails, unsched = [], [], 0, 0.0, 0, 0, 0
            util, makespan = [], []
            for seed in run.seeds:
                o, jobs = run.outcomes[(p, seed)], run.jobs[seed]
                m = _mask(jobs, cls)
                done = m & np.array([s == "finished" for s in o.state])
                jct.append((o.end - jobs.submit)[done])
                wait.append((o.start - jobs.submit)[done])
                mig += int(o.migrations[m].sum())
                mig_s += float(o.migration_s[m].sum())
                restarts += int(o.restarts[m].sum())
                fails += sum(o.state[j] == "failed" for j in np.flatnonzero(m))
                unsched += sum(o.state[j] == "unschedulable" for j in np.flatnonzero(m))
                makespan.append(o.makespan)
                util.append(o.card_seconds / (cards_total * o.makespan) if o.makespan > 0 else 0.0)
            jct_a, wait_a = np.concatenate(jct), np.concatenate(wait)
            q = np.percentile(jct_a, [50, 95, 99]) if jct_a.size else [np.nan] * 3
            out.append({"policy": p, "class": cls, "jobs": int(jct_a.size), "jct_mean_s": _mean(jct_a),
                        "jct_p50_s": float(q[0]), "jct_p95_s": float(q[1]), "jct_p99_s": float(q[2]),
                        "wait_mean_s": _mean(wait_a), "makespan_s": float(np.mean(makespan)),
                        "card_utilisation": float(np.mean(util)), "migrations": mig, "migration_cost_s": mig_s,
                        "restarts": restarts, "failed": fails, "unschedulable": unsched})
    return out


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if a.size else float("nan")


def changes(run: ReplayRun, resamples: int = 2000, level: float = 0.95) -> list[dict]:
    """Mean JCT change of each policy against each baseline, per class, with a bootstrap interval:
    over seeds (the per-seed change of mean JCT resampled), or over jobs paired by id when one seed."""
    rng = np.random.default_rng(12345)
    lo_q, hi_q = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    out = []
    for base in BASELINES:
        if base not in run.policies:
            continue
        for p in run.policies:
            if p == base:
                continue
            for cls in CLASSES:
                per_seed, pairs = [], []
                for seed in run.seeds:
                    a, b, jobs = run.outcomes[(p, seed)], run.outcomes[(base, seed)], run.jobs[seed]
                    done = _mask(jobs, cls) & np.isfinite(a.end) & np.isfinite(b.end)
                    ja, jb = (a.end - jobs.submit)[done], (b.end - jobs.submit)[done]
                    if ja.size:
                        per_seed.append(ja.mean() / jb.mean() - 1)
                        pairs.append((ja, jb))
                if not per_seed:
                    continue
                est = float(np.mean(per_seed))
                if len(per_seed) > 1:
                    boots = rng.choice(np.array(per_seed), (resamples, len(per_seed))).mean(axis=1)
                else:
                    ja, jb = pairs[0]
                    idx = rng.integers(0, ja.size, (resamples, ja.size))
                    boots = ja[idx].mean(axis=1) / jb[idx].mean(axis=1) - 1
                lo, hi = np.percentile(boots, [lo_q, hi_q])
                out.append({"policy": p, "against": base, "class": cls, "jct_change": est,
                            "ci_low": float(lo), "ci_high": float(hi),
                            "interval_over": "seeds" if len(per_seed) > 1 else "jobs"})
    return out


def power_summary(run: ReplayRun, card_hour_price: float = 1.0, energy_price_mwh: float = 100.0) -> dict[str, dict]:
    """Per policy, averaged over seeds: the sites' power figures (streams/replay/power.py), the
    card-hours its jobs held (waiting for data or a delayed start included) and what they cost, as
    ``cnsched report cost`` prices them: card-hours x the card-hour price + energy x its price."""
    out = {}
    for p in run.policies:
        figs = [{**o.power, "card_hours": o.card_seconds / 3600.0} for o in
                (run.outcomes[(p, seed)] for seed in run.seeds) if o.power]
        if figs:
            mean = {k: float(np.mean([f[k] for f in figs])) for k in figs[0]}
            mean["cost"] = mean["card_hours"] * card_hour_price + mean["energy_mwh"] * energy_price_mwh
            out[p] = {k: round(v, 3) for k, v in mean.items()}
    return out
