"""The replay's world: its configuration, the ground-truth network between racks, and the views the
real Scheduler reads (inventory records, window results) — drawn around that truth, never the truth.

- Nodes report like compute probes do (``rack``, accelerator model, peaks, memory); half the racks of
  every site hold the newer card (``fast_speed`` x the trace's reference card), so compute matters.
- Probes run at rack level (see streams.worker.scheduling.path_table): every rack pair both ways
  (inside a rack too) and each site's store to every rack, one window per ``epoch_s``, drawn by
  core.observe around the truth: RTT (inter-site pairs from the measurements, x ``reroute_factor``
  during a reroute), loss (``burst_loss`` during a loss burst) and bandwidth utilisation of the
  busier rack uplink, ``1 - 1 / (1 + jobs crossing it)`` (0 on a path inside one rack: it crosses none).
"""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from core.jobperf import PerfModel
from core.observe import ProbeModel, medians_from_draws, observe_medians, probe_draws
from core.topology import Fabric
from streams.adapters.network import PathColumns
from streams.replay.cluster import Cluster, ClusterSpec
from streams.replay.models import ModelTable
from streams.replay.stores import store_of

ARRIVE, FINISH, EPOCH, NET, FAIL, REPAIR, STEP, UPLINK = range(8)  # the replay's event kinds
T0 = 1_700_000_000.0  # the scheduler's clock at the trace's second 0 (its messages want epoch seconds)


@dataclass(frozen=True)
class SimConfig:
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    perf: PerfModel = field(default_factory=PerfModel)
    probes: ProbeModel = field(default_factory=ProbeModel)
    epoch_s: float = 300.0  # one probe window per epoch
    fast_speed: float = 1.5  # the newer card against the trace's reference card
    data_share: float = 0.3  # jobs with their data at a home site (users hashed to sites)
    data_gb: float = 500.0
    # data that follows compute (issue 53, E2): ours' scheduler stages a job's data at its site's store
    # and later jobs reading it load there (streams/worker/scheduling/staging.py); False: no staging
    staging: bool = True
    datasets: str = "user"  # what a data job reads: its user's one data set ("user") or its own ("job")
    # issue 53's E5: each rack's uplink driven by a real RTT series too (streams/replay/dynamics.py;
    # with the site pairs' series only: replay's rtt_series)
    uplink_dynamics: bool = False
    checkpoint_every_s: float = 1800.0  # of work; a failure or a move resumes from the last one
    checkpoint_gb: float = 20.0
    restart_s: float = 60.0  # to start again after a move or a failure
    reroutes_per_day: float = 0.5  # per site pair: RTT x reroute_factor for event_hours
    reroute_factor: float = 2.0
    bursts_per_day: float = 0.5  # per site pair: loss burst_loss for event_hours / 4
    burst_loss: float = 0.05
    event_hours: float = 4.0
    failures_per_node_day: float = 0.002  # down for repair_hours, its jobs resume from checkpoints
    repair_hours: float = 2.0
    max_restarts: int = 10
    teams: int = 6  # users hashed into this many teams (streams/replay/teams.py)
    quota_max_factor: float = 0.0  # a team may hold this times its guarantee (ours-quotas); 0: no maximum
    card_kw: float = 0.7  # a working card's draw (site power curves; streams/replay/power.py)
    ramp_limit_mw_per_min: float = 0.0  # power-aware starts: a site's limit; 0: none
    # the durations every policy's queue sees (core/estimates.py): "limit", a user's requested limit
    # (run time x U[1, limit_factor], rounded up to round values), or "oracle", the trace's (an ablation)
    estimate: str = "limit"
    limit_factor: float = 5.0  # assumed: Mu'alem & Feitelson 2001 sweep f; users over-ask by a few times
    # the queue's order under ours' rule (core.quota.queue_order; topology serves by age whatever this says):
    # "response", the worker's default, or "fifo" (an ablation: what the order adds)
    queue_order: str = "response"
    # ours (and compute-only) plan with run times predicted from history (streams/worker/scheduling/
    # durations.py); False: with the requested limits, as topology does (an ablation: what they add)
    predictions: bool = True
    # ours (and compute-only) cost a task with its workload's card speeds as its runs measured them
    # (streams/worker/scheduling/speeds.py); False: with the metering's, as topology does (an ablation)
    learned_speeds: bool = True
    # the measured models jobs are drawn from (streams/replay/models.py, issue 53): each job's
    # communication share and speed on the newer card from its model; None: the assumed ones (a
    # communication share drawn from perf's range, every job fast_speed times faster on the newer card)
    models: ModelTable | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epoch_s", "fast_speed", "restart_s", "reroute_factor", "event_hours", "repair_hours",
                     "checkpoint_every_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.estimate not in ("limit", "oracle") or not self.limit_factor >= 1:
            raise ValueError("estimate is limit or oracle, and limit_factor at least 1")
        if self.datasets not in ("user", "job"):
            raise ValueError("datasets is user or job")
        if self.queue_order not in ("response", "fifo"):
            raise ValueError("queue_order is response or fifo")
        if not 0 <= self.data_share <= 1 or not 0 <= self.burst_loss < 1:
            raise ValueError("data_share in [0, 1] and burst_loss in [0, 1)")
        for name in ("data_gb", "checkpoint_gb", "reroutes_per_day", "bursts_per_day", "failures_per_node_day",
                     "card_kw", "ramp_limit_mw_per_min"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def flat(self) -> dict:
        """Every parameter, flat (printed and stored with the results)."""
        out = {}
        for k, v in dataclasses.asdict(dataclasses.replace(self, models=None)).items():
            if k == "models":
                out[k] = self.models.source if self.models is not None else "assumed"
            elif isinstance(v, dict):
                out.update({f"{k}.{a}": b for a, b in v.items()})
            else:
                out[k] = v
        return out


class SimInventory:
    """The inventory the Scheduler reads (duck-typed streams.worker.state_tables.Inventory)."""

    def __init__(self, cluster: Cluster, fast: np.ndarray, card_kw: float = 0.0, fast_speed: float = 1.5) -> None:
        """``fast``: the nodes with the newer card, ``fast_speed`` times the reference card (what
        their reported peak says: with 1.0 every node reports the same card)."""
        self.version = 0
        fast = fast & (fast_speed != 1.0)
        self._records = [{
            "node": node, "ts": T0, "received_at": T0, "status": "up", "rack": f"{cluster.sites[s]}.r{r}",
            "region": cluster.sites[s], "cards": cluster.spec.cards_per_node,
            "accel_model": "H100" if f else "A100", "accel_class": "gpu-80g", "peak_tflops": {"fp16": 660.0 * (fast_speed if f else 1.0), "fp32": 60.0},
            "mem_gb": 80.0, "host_mem_gb": 2048.0, "inter_bw_gbps": cluster.spec.node_gbps,
            "power_kw": card_kw * cluster.spec.cards_per_node or None,
        } for node, s, r, f in zip(cluster.node_ids, cluster.node_site, cluster.node_rack, fast, strict=True)]

    def records(self) -> list[dict]:
        return self._records

    def set_status(self, node: int, status: str) -> None:
        self._records[node] = {**self._records[node], "status": status}
        self.version += 1


class SimNet:
    """The network view the Scheduler reads (duck-typed streams.worker.state_tables.NetState):
    window results of the rack-level probes, one per path per epoch."""

    def __init__(self) -> None:
        self.version = 0
        self._cols = PathColumns()
        self._rows = None  # (the paths of the last put, their rows): the probed paths rarely change

    def columns(self) -> PathColumns:
        return self._cols

    def put(self, src: list[str], dst: list[str], res: dict[str, np.ndarray], util: np.ndarray, end: float,
            gbps: np.ndarray | None = None) -> None:
        """One window per path: RTT statistics (``res``, core.observe), bandwidth utilisation and
        measured throughput (``gbps``; None: not measured)."""
        values = {"p95": res["p95"], "p50": res["p50"], "lost": res["lost"], "count": res["count"],
                  "bw_util": util, "end": np.full(len(src), end)}
        if gbps is not None:
            values["gbps"] = gbps
        same = self._rows is not None and self._rows[0] == (src, dst)
        self._rows = ((src, dst), self._cols.set_many(src, dst, values, self._rows[1] if same else None))
        self.version += 1


@dataclass
class Truth:
    """Rack-level ground truth. Racks are numbered site-major: rack g = site x racks_per_site + r."""

    cluster: Cluster
    fabric: Fabric
    rtt_factor: np.ndarray  # float64[S, S] reroutes in force
    loss: np.ndarray  # float64[S, S] loss bursts in force
    rack_names: list[str]
    rack_site: np.ndarray  # int64[G]
    _probed: _Probed | None = None  # the probed paths (_layout), built once
    _jitter: np.ndarray | None = None  # their probes' spreads (probe_jitter), built once
    # the measured values now (the snapshot, or the series' step in force: cluster.series)
    rtt_now: np.ndarray | None = None
    gbps_now: np.ndarray | None = None
    loss_now: np.ndarray | None = None
    uplink_ratio: np.ndarray | None = None  # float64[S, R] each rack uplink's RTT ratio in force (cluster.uplinks)

    @classmethod
    def of(cls, cluster: Cluster) -> Truth:
        spec = cluster.spec
        k = len(cluster.sites)
        racks = [f"{cluster.sites[s]}.r{r}" for s in range(k) for r in range(spec.racks_per_site)]
        t = cls(cluster, Fabric(node_gbps=spec.node_gbps, uplink_gbps=spec.uplink_gbps), np.ones((k, k)),
                np.zeros((k, k)), racks, np.repeat(np.arange(k), spec.racks_per_site))
        if cluster.series is not None:
            t.rtt_now, t.gbps_now, t.loss_now = cluster.series.first_values(cluster.rtt_ms, cluster.gbps)
            for at, first, end in cluster.series.steps():
                if at <= 0:  # in force when the replay starts; later ones are its STEP events
                    t.step(first, end)
        else:
            t.rtt_now, t.gbps_now, t.loss_now = cluster.rtt_ms.copy(), cluster.gbps.copy(), np.zeros((k, k))
        t.uplink_ratio = np.ones((k, spec.racks_per_site))
        for at, first, end in cluster.uplinks.steps() if cluster.uplinks is not None else ():
            if at <= 0:
                t.step_uplinks(first, end)
        np.fill_diagonal(t.rtt_now, 0.0)
        np.fill_diagonal(t.gbps_now, np.inf)
        np.fill_diagonal(t.loss_now, 0.0)
        return t

    def step(self, first: int, end: int) -> None:
        """The series' rows ``first:end`` take effect (one time step of cluster.series)."""
        for i in range(first, end):
            self.cluster.series.apply(i, self.rtt_now, self.gbps_now, self.loss_now)

    def step_uplinks(self, first: int, end: int) -> None:
        """The uplink series' rows ``first:end`` take effect (one time step of cluster.uplinks)."""
        u = self.cluster.uplinks
        self.uplink_ratio.ravel()[u.rack[first:end]] = u.ratio[first:end]

    def site_loss(self) -> np.ndarray:
        """Loss in force: the measured one, or a synthetic burst's when higher."""
        return np.maximum(self.loss, self.loss_now)

    def site_rtt(self) -> np.ndarray:
        return self.rtt_now * self.rtt_factor

    def site_gbps(self) -> np.ndarray:
        """Measured throughput, cut by loss in force (x max(0.05, 1 - 10 x loss))."""
        return self.gbps_now * np.maximum(0.05, 1.0 - 10.0 * self.site_loss())

    def probe_jitter(self, default: float) -> np.ndarray | None:
        """float64[P] each probed path's lognormal sigma, in probe_paths' order: a path between sites
        whose ping spread was measured (Skyplane's mdev / avg RTT, as the data's README says) uses
        it; others the probe model's ``default``. None when nothing was measured."""
        spread = self.cluster.spread
        if spread is None or not np.isfinite(spread).any():
            return None
        if self._jitter is None:
            lay = self._layout()
            v = spread[lay.sa, lay.sb]
            self._jitter = np.where(~lay.same_site & np.isfinite(v), v, default)
        return self._jitter

    def probe_paths(self, uplink_jobs: np.ndarray) -> tuple[list[str], list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, rtt_ms, loss, bw_util) of every probed path: rack pairs and store -> rack."""
        f, lay = self.fabric, self._layout()
        between = self.site_rtt()[lay.sa, lay.sb]
        q = self.uplink_ratio.ravel()
        inside = f.site_rtt_ms * np.maximum(q[lay.ra], q[lay.rb])
        rtt = np.where(lay.same_rack, f.rack_rtt_ms, np.where(lay.same_site, inside, between))
        loss = np.where(lay.same_site, 0.0, self.site_loss()[lay.sa, lay.sb])
        crossing = uplink_jobs.ravel()
        # a path inside one rack never crosses its uplink: the jobs sharing the uplink do not load it
        # (it carried them until issue 52, and the probes reported in-rack paths as busy as the uplink)
        util = np.where(lay.same_rack, 0.0, 1.0 - 1.0 / (1.0 + np.maximum(crossing[lay.ra], crossing[lay.rb])))
        return lay.src, lay.dst, rtt, loss, util

    def probe_gbps(self, uplink_jobs: np.ndarray) -> np.ndarray:
        """float64[P] the throughput a new transfer measures on each probed path (probe_paths' order; an
        iperf-like probe, taken as exact): inside a rack the node link; across racks the node link or
        a share of the busier rack uplink among the jobs crossing it and the new one, whichever is
        smaller; between sites no more than the measured site throughput (cut by loss in force)."""
        f, lay = self.fabric, self._layout()
        crossing, q = uplink_jobs.ravel(), self.uplink_ratio.ravel()
        share = f.uplink_gbps / np.maximum((1.0 + crossing[lay.ra]) * q[lay.ra], (1.0 + crossing[lay.rb]) * q[lay.rb])
        across = np.minimum(f.node_gbps, share)
        wan = self.site_gbps()[lay.sa, lay.sb]
        return np.where(lay.same_rack, f.node_gbps, np.where(lay.same_site, across, np.minimum(across, wan)))

    def _layout(self) -> _Probed:
        """The probed paths, which never change: rack pairs (every ordered pair, a rack to itself
        included), then each site's store to every rack; built once."""
        if self._probed is None:
            site, k = self.rack_site, len(self.cluster.sites)
            g = np.arange(site.size)
            a, b = (x.ravel() for x in np.meshgrid(g, g, indexing="ij"))
            s_idx, r_idx = (x.ravel() for x in np.meshgrid(np.arange(k), g, indexing="ij"))
            names = [f"rack:{x}" for x in self.rack_names]
            sa, sb = np.concatenate([site[a], s_idx]), np.concatenate([site[b], site[r_idx]])
            self._probed = _Probed(
                [names[i] for i in a] + [store_of(self.cluster.sites[s]) for s in s_idx],
                [names[i] for i in b] + [names[r] for r in r_idx], sa, sb, sa == sb,
                np.concatenate([a == b, np.zeros(r_idx.size, bool)]), np.concatenate([a, r_idx]),
                np.concatenate([b, r_idx]))
        return self._probed


@dataclass(frozen=True)
class _Probed:
    """Truth's probed paths (Truth._layout): names, the sites at both ends (a store's at its site),
    whether inside one site or one rack, and the racks whose uplinks a path shares (a store path:
    its rack's twice)."""

    src: list[str]
    dst: list[str]
    sa: np.ndarray
    sb: np.ndarray
    same_site: np.ndarray
    same_rack: np.ndarray
    ra: np.ndarray
    rb: np.ndarray


def observe_epoch(net: SimNet, truth: Truth, uplink_jobs: np.ndarray, probes: ProbeModel, end: float,
                  seed: int, ahead: DrawAhead | None = None, next_seed: int | None = None) -> None:
    """One window per probed path, drawn around the truth, into the Scheduler's network view (core.
    observe.observe_medians with ``seed``); with ``ahead``, the window seeded ``next_seed`` is drawn
    meanwhile on another core."""
    src, dst, rtt, loss, util = truth.probe_paths(uplink_jobs)
    jitter = truth.probe_jitter(probes.jitter)
    if ahead is None:
        res = observe_medians(rtt, loss, probes, seed, jitter)
    else:
        res = ahead.windows(rtt, loss, jitter, seed, next_seed)
    net.put(src, dst, res, util, end, truth.probe_gbps(uplink_jobs))


class DrawAhead:
    """The replay's probe windows drawn one epoch ahead in a background thread (what draws them —
    numpy's generator, the compiled samples and medians, numpy's sort — releases the GIL, so it runs
    on the other core while the Scheduler rescores): the next epoch's windows from the truth as it
    stands now, and when that epoch comes, the paths whose RTT or loss changed meanwhile drawn again
    from the same draws (each path's window is its own: core.observe.medians_from_draws). The values
    are the ones drawing at the time gives, bit for bit. Use it as a context: inside, the interpreter
    hands the GIL to the drawing thread sooner; on leaving, the thread stops and the interval is
    restored."""

    SWITCH_S = 0.00002  # the interpreter's thread switch interval meanwhile (5 ms by default)

    def __init__(self, probes: ProbeModel) -> None:
        self.probes = probes
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cnsched-probes")
        self._switch: float | None = None  # the interval before the context was entered
        self._next = None  # (seed, future of (rtt, loss, jitter, draws, windows))
        self.redrawn = 0  # paths drawn again because their truth moved (for tests and curiosity)

    def __enter__(self) -> DrawAhead:
        # the drawing thread needs the GIL for a moment between its long GIL-free calls: at the
        # default 5 ms a wait each time, the next window was often not ready when its epoch came
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, self.SWITCH_S))
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def windows(self, rtt: np.ndarray, loss: np.ndarray, jitter: np.ndarray | None, seed: int,
                next_seed: int | None) -> dict[str, np.ndarray]:
        ahead = self._next
        if ahead is not None and ahead[0] == seed:
            old_rtt, old_loss, old_jitter, draws, res = ahead[1].result()
            moved = ~((old_rtt == rtt) & (old_loss == loss))
            if old_jitter is not jitter:
                moved[:] = True
            if moved.any():
                rows = np.flatnonzero(moved)
                part = medians_from_draws(rtt[rows], loss[rows], self.probes, tuple(d[rows] for d in draws),
                                          None if jitter is None else jitter[rows])
                for k, v in part.items():
                    res[k][rows] = v
                self.redrawn += rows.size
        else:
            res = self._draw(rtt, loss, jitter, seed)[4]
        self._next = None if next_seed is None else \
            (next_seed, self._pool.submit(self._draw, rtt.copy(), loss.copy(), jitter, next_seed))
        return res

    def _draw(self, rtt, loss, jitter, seed):
        draws = probe_draws(rtt.shape[0], self.probes, np.random.default_rng(seed))
        return rtt, loss, jitter, draws, medians_from_draws(rtt, loss, self.probes, draws, jitter)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._next = None
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None


def network_events(cfg: SimConfig, sites: int, nodes: int, horizon_s: float) -> list[tuple]:
    """Reroutes and loss bursts per site pair, node failures and repairs, up to ``horizon_s``
    (Poisson, seeded): (t, kind, a, b) for Replay."""
    rng = np.random.default_rng(cfg.seed + 7)
    out = []
    days = horizon_s / 86400.0
    hold = cfg.event_hours * 3600.0
    for a in range(sites):
        for b in range(a + 1, sites):
            for rate, on, off, length in ((cfg.reroutes_per_day, 1, 2, hold), (cfg.bursts_per_day, 3, 4, hold / 4)):
                for t in np.sort(rng.uniform(0, horizon_s, rng.poisson(rate * days))):
                    out += [(float(t), NET, on, a * sites + b), (float(t) + length, NET, off, a * sites + b)]
    for node in range(nodes):
        for t in np.sort(rng.uniform(0, horizon_s, rng.poisson(cfg.failures_per_node_day * days))):
            out += [(float(t), FAIL, node, 0), (float(t) + cfg.repair_hours * 3600.0, REPAIR, node, 0)]
    return out
