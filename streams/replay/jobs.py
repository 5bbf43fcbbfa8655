"""A trace's jobs as the replay runs them: cards per node, communication shares, home sites and data,
class, and the Task each policy's scheduler is asked to place."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from core.estimates import like_completed, limit_factors, requested_limits
from core.jobperf import comm_shares
from schemas.sched import Task
from streams.replay.cluster import Cluster
from streams.replay.stores import store_of
from streams.replay.teams import team_names
from streams.replay.traces import JobTrace, TraceError
from streams.replay.world import T0, SimConfig

COMPLETED = ("pass", "passed", "completed", "succeeded", "success", "")  # statuses of work that completed


@dataclass
class SimJobs:
    submit: np.ndarray  # float64[J] seconds from the trace start
    ideal: np.ndarray  # float64[J] the trace's duration (its time on one rack, data at hand)
    nodes: np.ndarray  # int64[J]
    cards: np.ndarray  # int64[J] cards per node
    comm: np.ndarray  # float64[J] communication share at the ideal placement
    home: np.ndarray  # int64[J] site of its data (-1: none)
    data_gb: np.ndarray  # float64[J]
    types: list[str]
    team: list[str] = None  # each job's team (its user's; streams/replay/teams.py)
    estimate: np.ndarray = None  # float64[J] the duration every policy's queue is told (SimConfig.estimate)
    completed: np.ndarray = None  # bool[J] the trace says the job completed (streams/replay/stats.py)
    user: list[str] = None  # who submitted each job (the trace's user; what run-time predictions key on)
    model: np.ndarray = None  # int64[J] its measured model (a row of SimConfig.models; -1: assumed timing)
    fast: np.ndarray = None  # float64[J] its speed on the newer card against the reference card
    dataset: list[str] = None  # the name of what each data job reads (a staged copy is found by it)

    def __len__(self) -> int:
        return int(self.submit.size)

    @property
    def sensitive(self) -> np.ndarray:
        """bool[J]: network-sensitive (several nodes, or data to load from a home site)."""
        return (self.nodes > 1) | (self.home >= 0)


def sim_jobs(trace: JobTrace, cluster: Cluster, cfg: SimConfig) -> SimJobs:
    """The trace's jobs on this cluster; TraceError when one cannot fit it at all."""
    cpn = cluster.spec.cards_per_node
    nodes = np.maximum(trace.nodes, -(-trace.gpus // cpn))  # more cards than a node has: more nodes
    cards = np.maximum(-(-trace.gpus // nodes), 1)
    big = int(np.argmax(nodes))
    if nodes[big] > len(cluster.node_ids):
        raise TraceError(f"{trace.source}: job {big + 1} needs {nodes[big]} nodes; the cluster has "
                         f"{len(cluster.node_ids)} (raise --racks-per-site or --nodes-per-rack)")
    rng = np.random.default_rng(cfg.seed + 17)
    sites = {s: i for i, s in enumerate(cluster.sites)}
    if trace.data_site is not None and any(trace.data_site):
        missing = sorted({s for s in trace.data_site if s and s not in sites})
        if missing:
            raise TraceError(f"{trace.source}: data_site {missing[0]!r} is not among the sites of the network "
                             f"data ({', '.join(cluster.sites)})")
        home = np.array([sites.get(s, -1) for s in trace.data_site], np.int64)
        data_gb = np.where(home >= 0, trace.data_gb if trace.data_gb is not None else cfg.data_gb, 0.0)
    else:  # users hashed to sites; a share of jobs read their data there
        user_site = np.array([zlib.crc32(f"{cfg.seed}:{u}".encode()) % len(sites) for u in trace.user], np.int64)
        home = np.where(rng.random(len(trace)) < cfg.data_share, user_site, -1)
        data_gb = np.where(home >= 0, cfg.data_gb, 0.0)
    if trace.job_type is not None:
        from core.vocabulary import TASK_TYPES

        bad = next((i for i, t in enumerate(trace.job_type) if t not in TASK_TYPES), None)
        if bad is not None:
            raise TraceError(f"{trace.source}: job {bad + 1}: type: {trace.job_type[bad]!r} is not one of "
                             f"{', '.join(TASK_TYPES)}")
    # Philly's jobs train: a gang and a one-node job reading a data set are data-parallel trainers, the
    # rest fine-tunes (not data-intensive: that type streams its data all along; these load it once)
    types = trace.job_type or ["training-data-parallel" if n > 1 or h >= 0 else "fine-tune"
                               for n, h in zip(nodes, home, strict=True)]
    ideal = np.maximum(trace.duration_s.astype(np.float64), 1.0)
    done = np.array([s.strip().lower() in COMPLETED for s in trace.status], bool)
    model, comm, fast = timing(len(trace), nodes, cfg)
    return SimJobs(trace.submit_s.astype(np.float64), ideal, nodes.astype(np.int64), cards.astype(np.int64),
                   comm, home, data_gb.astype(np.float64), list(types),
                   team_names(trace.user, cfg.teams, cfg.seed), estimates(ideal, cfg, done, nodes * 1000 + cards), done,
                   [str(u) for u in trace.user], model, fast, datasets(trace.user, home, cfg.datasets))


def datasets(users, home: np.ndarray, kind: str) -> list[str]:
    """Each job's data set name: ``user``, one per user and home site (a user's jobs read the same
    data — Philly's users submit series of runs of one model, Jeon et al., ATC 2019); ``job``, its own."""
    clean = (re.sub(r"[^A-Za-z0-9._:-]", "_", str(u))[:96] for u in users)
    return [f"data.{c or 'nobody'}.{h}" if kind == "user" else f"data.job{j}"
            for j, (c, h) in enumerate(zip(clean, home.tolist(), strict=True))]


def timing(n: int, nodes: np.ndarray, cfg: SimConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model int64[J], communication share float64[J], speed on the newer card float64[J]) of the
    jobs: with measured models (``cfg.models``) each job draws one (uniformly, seeded) and takes its
    share on its node count and its speed ratio (1 when every card is the same, ``fast_speed`` 1);
    without, a share drawn from ``cfg.perf``'s range and ``fast_speed`` for every job."""
    if cfg.models is None:
        return np.full(n, -1, np.int64), comm_shares(n, cfg.perf, cfg.seed), np.full(n, cfg.fast_speed)
    model = np.random.default_rng(cfg.seed + 53).integers(0, len(cfg.models), n)
    fast = cfg.models.speed[model] if cfg.fast_speed != 1.0 else np.ones(n)
    return model, cfg.models.comm_at(model, nodes), fast.astype(np.float64)


def estimates(ideal: np.ndarray, cfg: SimConfig, completed: np.ndarray | None = None,
              shape: np.ndarray | None = None) -> np.ndarray:
    """What every policy is told a job will take: its requested limit (core/estimates.py, the factors
    drawn from the seed; a job that failed or was killed gets a completed job's of its ``shape``,
    core.estimates.like_completed), or its trace duration under ``estimate="oracle"``."""
    if cfg.estimate == "oracle":
        return ideal.copy()
    limits = requested_limits(ideal, limit_factors(ideal.size, cfg.limit_factor, cfg.seed + 29))
    if completed is None:
        return limits
    return like_completed(limits, completed, np.zeros(ideal.size, np.int64) if shape is None else shape, cfg.seed + 31)


def task_of(jobs: SimJobs, j: int, cluster: Cluster, cfg: SimConfig, alpha: float | None = None) -> Task:
    data = ({"data_source": {"node": store_of(cluster.sites[jobs.home[j]]), "size_gb": float(jobs.data_gb[j]),
                             "name": jobs.dataset[j] if jobs.dataset else None}}
            if jobs.home[j] >= 0 else {})
    return Task(id=f"j{j}", type=jobs.types[j], resources={"cards": int(jobs.cards[j])}, peers=int(jobs.nodes[j]),
                submitted_at=T0 + float(jobs.submit[j]), expected_duration_s=float(jobs.estimate[j]),
                checkpoint_gb=cfg.checkpoint_gb, alpha=alpha, team=jobs.team[j] if jobs.team else "",
                submitted_by=(jobs.user[j][:128] or None) if jobs.user else None, workload=workload_of(jobs, j, cfg),
                **data)


def workload_of(jobs: SimJobs, j: int, cfg: SimConfig) -> str | None:
    """What job j says it runs: its measured model's name (a submitter knows what they train; how fast
    it runs where, the scheduler learns from its runners: core.speeds); None under the assumed timing."""
    m = -1 if jobs.model is None else int(jobs.model[j])
    return cfg.models.names[m] if m >= 0 and cfg.models is not None else None
