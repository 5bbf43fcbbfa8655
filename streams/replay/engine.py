"""The discrete-event replay of one policy: arrivals, finishes, probe epochs, network events and node
failures on a simulated clock, with the real Scheduler (ledger, scoring, placement, rescheduling)
deciding: every policy but ``random`` and ``fifo`` shares its queue (priority, the head's
reservation, backfill) and sees the same duration estimates (streams/replay/jobs.py), never the
trace's durations unless ``SimConfig.estimate`` is ``oracle`` (an ablation).

Policies: ``ours`` (default alphas, rescheduling on), ``ours-static`` (no rescheduling),
``compute-only`` (alpha 1; the seconds rule reads every gang's paths as one rack's and no data load's path:
locality-blind), ``topology`` (core.placement.topology_scores through the same queue:
data-local, faster cards first, a gang in one rack or one site or it waits, best fit — what Slurm's
topology plugin, Volcano HyperNodes or Kueue's topology-aware scheduling do), ``random`` and
``fifo`` (their own greedy queue: strict first come, first served). Each sees identical jobs,
network, events and seeds. Invariants checked at every event (a violation stops the run naming the event):
no node holds more cards than it has, the Scheduler's ledger is never overbooked, time never goes
back; at the end every job is finished, failed or unschedulable with a reason.
"""

from __future__ import annotations

import contextlib
import heapq
import math

import numpy as np

from core.feasibility import fitting
from core.jobperf import job_time
from core.placement import topology_pick
from core.topology import placement_paths
from streams.replay.cluster import Cluster
from streams.replay.exposure import mark_hits
from streams.replay.jobs import SimJobs, task_of
from streams.replay.outcome import InvariantError, Outcome, Run, check_invariants
from streams.replay.power import SitePower
from streams.replay.stores import SimStores
from streams.replay.teams import quota_set, stop_preempted
from streams.replay.world import (
    ARRIVE,
    EPOCH,
    FAIL,
    FINISH,
    NET,
    REPAIR,
    STEP,
    T0,
    UPLINK,
    DrawAhead,
    SimConfig,
    SimInventory,
    SimNet,
    Truth,
    observe_epoch,
)

POLICIES = ("ours", "ours-static", "compute-only", "topology", "random", "ours-quotas", "fifo", "oracle-ect")
SCHEDULED = ("ours", "ours-static", "compute-only", "topology", "ours-quotas", "oracle-ect")  # one queue: the Scheduler's
MOVING = ("ours", "oracle-ect")  # re-evaluate running tasks every epoch
DEFAULT_POLICIES = ("ours", "topology", "compute-only")  # cnsched simulate's default: the headline's


class Replay:
    def __init__(self, jobs: SimJobs, cluster: Cluster, cfg: SimConfig, policy: str, events: list[tuple]) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
        self.jobs, self.cluster, self.cfg, self.policy = jobs, cluster, cfg, policy
        spec = cluster.spec
        n = len(cluster.node_ids)
        self.rng = np.random.default_rng(cfg.seed + 101)
        g = cluster.node_site * spec.racks_per_site + cluster.node_rack
        self.rack = g
        self.fast = (cluster.node_rack % 2) == 0  # half the racks of each site: the newer card
        self.free = np.full(n, spec.cards_per_node, np.int64)
        self.up = np.ones(n, bool)
        self.truth = Truth.of(cluster)
        self.uplink = np.zeros((len(cluster.sites), spec.racks_per_site), np.int64)
        self.running: dict[int, Run] = {}
        self.queue: list[int] = []  # baselines' FIFO queue
        J = len(jobs)
        self.out = Outcome(np.full(J, np.nan), np.full(J, np.nan), [""] * J, [""] * J, np.zeros(J, np.int64),
                           np.zeros(J), np.zeros(J, np.int64), 0.0, 0.0, preemptions=np.zeros(J, np.int64),
                           load_s=np.zeros(J), hit=np.zeros(J, bool))
        self.heap: list[tuple] = []
        self.seq = 0
        self.others = 0  # events in the heap besides epochs (when none is left and nothing runs, it is over)
        self.resume: dict[int, float] = {}  # work a re-queued job resumes from
        self.observed = -1  # the epoch the Scheduler's network view holds
        # ours reads every epoch's windows: the next one is drawn meanwhile on the other core
        self.ahead = DrawAhead(cfg.probes) if policy == "ours" else None
        self.checked = None  # (ledger changes, inventory version) the invariants last held at
        self.now = 0.0
        self.left = J
        for j in range(J):
            self._push(float(jobs.submit[j]), ARRIVE, j)
        for ev in events:
            self._push(*ev)
        for kind, series in ((STEP, cluster.series), (UPLINK, cluster.uplinks)):
            for at, first, end in series.steps() if series is not None else ():
                if at > 0:
                    self._push(at, kind, first, end)
        self._push(0.0, EPOCH, 0)
        self.sched = self.copies = None
        self.stores = SimStores(cluster, self.truth, cfg.perf.ideal_gbps, T0)
        self.power = SitePower(cluster.sites, cfg.card_kw, cfg.ramp_limit_mw_per_min)
        if policy in SCHEDULED:
            self._scheduler(jobs, cluster, cfg, policy)

    def _scheduler(self, jobs: SimJobs, cluster: Cluster, cfg: SimConfig, policy: str) -> None:
        """The Scheduler one of SCHEDULED policies decides with: its network view, inventory and
        settings (staging for ours' family; topology and compute-only never copy data)."""
        from core.quality import Freshness
        from streams.replay.baselines import TopologyScheduler
        from streams.worker.scheduling.state import Scheduler

        self.net = SimNet()  # its paths age by epochs: fresh for one, unknown after three
        kind = TopologyScheduler if policy == "topology" else Scheduler
        self.sched = kind(self.net, SimInventory(cluster, self.fast, cfg.card_kw, cfg.fast_speed),
                          ramps=self.power.book, node_timeout_s=math.inf, preemption=policy == "ours-quotas",
                          freshness=Freshness(cfg.epoch_s, 3 * cfg.epoch_s), audit=False,
                          sees_network=policy != "compute-only")
        if policy != "topology":  # topology serves by age (baselines.py); ablations: limits, metered speeds
            s = self.sched
            s.queue_rule, s.durations = cfg.queue_order, s.durations if cfg.predictions else None
            s.speeds = s.speeds if cfg.learned_speeds else None
        if cfg.staging and policy not in ("topology", "compute-only"):  # ours' data follows its compute
            self.copies = self.sched.copies
            self.copies.on_stage = self.stores.staged
        else:
            self.sched.copies.store = ""
        self.index = {x: i for i, x in enumerate(cluster.node_ids)}
        if policy == "oracle-ect":  # ours' rule told the replay's truth: each job's run and communication
            self.sched.durations = None
            self.sched.comm_of = {f"j{j}": float(jobs.comm[j]) for j in np.flatnonzero(jobs.nodes > 1).tolist()}
        if policy == "ours-quotas":
            self.sched.quotas.replace(quota_set(jobs.team, jobs.ideal * jobs.cards * jobs.nodes,
                                                len(cluster.node_ids) * cluster.spec.cards_per_node,
                                                cfg.quota_max_factor))

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, a: int, b=0) -> None:
        self.seq += 1
        self.others += kind != EPOCH
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def run(self, tick=None) -> Outcome:
        """Replay every event; ``tick(n)`` is told each time n more jobs ended (a progress bar)."""
        with self.ahead if self.ahead is not None else contextlib.nullcontext():
            return self._run(tick)

    def _run(self, tick) -> Outcome:
        left = self.left
        while self.heap and self.left > 0:
            t, _, kind, a, b = heapq.heappop(self.heap)
            self.others -= kind != EPOCH
            if kind == EPOCH and not self.running and self.others == 0:
                break  # nothing runs and nothing will happen: the queued jobs never fit
            if t < self.now - 1e-9:
                raise InvariantError(f"time went back: event {kind} at {t} after {self.now}")
            self.now = t
            if kind == ARRIVE:
                self._arrive(a)
            elif kind == FINISH and a in self.running and self.running[a].token == b:
                self._finish(a)
            elif kind == EPOCH:
                self._epoch()
            elif kind == NET:
                self._network(a, b)
            elif kind in (STEP, UPLINK):
                self._network_step(kind == UPLINK, a, b)
            elif kind == FAIL:
                self._fail(a)
            elif kind == REPAIR:
                self.up[a] = True
                if self.sched is not None:
                    self.sched.inv.set_status(a, "up")
                self._place_queued()
            check_invariants(self, kind, a, kind == EPOCH and self.policy not in MOVING)
            if tick is not None and self.left != left:
                tick(left - self.left)
                left = self.left
        for j in range(len(self.jobs)):
            if not self.out.state[j]:
                self.out.state[j], self.out.reason[j] = "unschedulable", "never placed: no capacity fitting it"
        self.out.makespan = float(np.nanmax(self.out.end)) if np.isfinite(self.out.end).any() else 0.0
        self.out.power, self.out.power_mw = self.power.summary(self.out.makespan), self.power.curves(self.out.makespan)
        return self.out

    # -------------------------------------------------------------- progress
    def _sync(self, j: int) -> Run:
        """Job j's progress brought up to now (lazily: only when its rate or place changes, or it
        stops), and the card-seconds it held meanwhile."""
        r = self.running[j]
        dt = self.now - r.last
        used = min(dt, r.pause)
        r.pause -= used
        r.work = min(r.work + (dt - used) / r.per_work, self.jobs.ideal[j])
        r.last = self.now
        self.out.card_seconds += dt * self.jobs.cards[j] * len(r.members)
        return r

    def _rate(self, j: int, members: list[int]) -> float:
        c = self.cluster
        rtt, gbps = placement_paths(members, c.node_site, c.node_rack, self.truth.site_rtt(), self.truth.site_gbps(),
                                    self.uplink, self.truth.fabric, self.truth.uplink_ratio)
        return float(job_time([1.0], [self.jobs.comm[j]], [len(members)], [rtt], [gbps], [0.0], [1.0],
                              self.cfg.perf, speed=[self._speed(j, members)])[0])

    def _speed(self, j: int, members: list[int]) -> float:
        """Job j's speed on ``members``: on the newer card where every member has one, else 1."""
        return float(self.jobs.fast[j]) if self.fast[members].all() else 1.0

    def _load_s(self, j: int, members: list[int]) -> float:
        """Extra time to load the job's data (over the slowest member's path from its home or a copy),
        added to the job's load figure."""
        s = self.stores.load_s(int(self.jobs.home[j]), float(self.jobs.data_gb[j]),
                               self.jobs.dataset[j] if self.jobs.dataset else None, members, self.uplink, self.now,
                               self.copies)
        self.out.load_s[j] += s
        return s

    def _reschedule_finish(self, j: int) -> None:
        r = self.running[j]
        r.token += 1
        left = r.pause + max(self.jobs.ideal[j] - r.work, 0.0) * r.per_work
        self._push(self.now + left, FINISH, j, r.token)

    def _uplinks(self, members: list[int], sign: int) -> None:
        c = self.cluster
        racks = {(int(c.node_site[m]), int(c.node_rack[m])) for m in members}
        if len(racks) > 1:
            for s, r in racks:
                self.uplink[s, r] += sign

    def _network_step(self, uplinks: bool, first: int, end: int) -> None:
        """A series' step takes effect; the running jobs a labelled change point in it reaches are flagged."""
        (self.truth.step_uplinks if uplinks else self.truth.step)(first, end)
        mark_hits(self.out.hit, self.cluster, uplinks, first, end, self.running, self.rack)
        self._refresh_rates()

    def _refresh_rates(self) -> None:
        """Gangs' rates after the network changed (uplink sharing, reroutes, loss)."""
        for j, r in self.running.items():
            if len(r.members) > 1:
                rate = self._rate(j, r.members)
                if rate != r.per_work:
                    self._sync(j).per_work = rate
                    self._reschedule_finish(j)

    # ------------------------------------------------------------- lifecycle
    def _start(self, j: int, members: list[int], resumed_work: float, start_at: float | None = None) -> None:
        """``start_at``: not before (the decision's, for our policies; a baseline's from the same book)."""
        if not np.all(self.free[members] >= self.jobs.cards[j]) or not self.up[members].all():
            raise InvariantError(f"job {j} placed on {members} without room at t={self.now:.0f}")
        self.free[members] -= self.jobs.cards[j]
        if math.isnan(self.out.start[j]):
            self.out.start[j] = self.now
        self._uplinks(members, +1)
        draw = self.power.draw(self.cluster.node_site, members, int(self.jobs.cards[j]))
        start_at = self.power.spaced(self.now, draw) if start_at is None and self.sched is None else start_at
        delay = max((start_at or self.now) - self.now, 0.0)
        self.power.on(j, self.now + delay, draw)
        pause = delay + self._load_s(j, members) + (self.cfg.restart_s if resumed_work > 0 else 0.0)
        self.running[j] = Run(members, resumed_work, pause, self._rate(j, members), self.now)
        self._reschedule_finish(j)
        if len(members) > 1:
            self._refresh_rates()

    def _stop(self, j: int) -> Run:
        self._sync(j)
        r = self.running.pop(j)
        self.power.off(j, self.now)
        self.free[r.members] += self.jobs.cards[j]
        self._uplinks(r.members, -1)
        if len(r.members) > 1:
            self._refresh_rates()
        return r

    def _finish(self, j: int) -> None:
        r = self._stop(j)
        self.out.end[j], self.out.state[j] = self.now, "finished"
        self.left -= 1
        if self.sched is not None:  # its runner reports its step rate there (the reference card's: 1)
            self.sched.finished(f"j{j}", T0 + self.now, throughput=self._speed(j, r.members))
        self._place_queued()

    def _fail(self, node: int) -> None:
        self.up[node] = False
        if self.sched is not None:
            self.sched.inv.set_status(node, "down")
        for j in [j for j, r in self.running.items() if node in r.members]:
            r = self._stop(j)
            ce = self.cfg.checkpoint_every_s
            resume = math.floor(r.work / ce) * ce
            self.out.restarts[j] += 1
            gone = self.out.restarts[j] > self.cfg.max_restarts
            if self.sched is not None:
                gone = self.sched.fail(f"j{j}", T0 + self.now, self.cfg.max_restarts) is None
            if gone:
                self.out.end[j], self.out.state[j], self.out.reason[j] = self.now, "failed", "restarts exhausted"
                self.left -= 1
                continue
            self.resume[j] = resume
            if self.sched is None:
                self.queue.insert(0, j)  # a restarted job goes first
        self._place_queued()

    # ------------------------------------------------------------- deciding
    def _arrive(self, j: int) -> None:
        if self.sched is not None:
            self._observe()
            alpha = 1.0 if self.policy == "compute-only" else None
            task = task_of(self.jobs, j, self.cluster, self.cfg, alpha)
            if self.policy == "oracle-ect":
                task = task.model_copy(update={"expected_duration_s": float(self.jobs.ideal[j])})
            d = self.sched.decide(task, T0 + self.now)
            stop_preempted(self)
            if d.status == "placed":
                self._placed(j, d.nodes, d.start_at)
            elif self.sched.reservation is None:
                self._place_queued()  # the worker retries a queue that grew: the head gets its reservation
            return
        self.queue.append(j)
        self._place_queued()

    def _placed(self, j: int, nodes: list[str], start_at: float | None) -> None:
        self.sched.start(f"j{j}", nodes)
        self._start(j, [self.index[n] for n in nodes], self.resume.pop(j, 0.0), start_at and start_at - T0)

    def _place_queued(self) -> None:
        if self.sched is not None:
            if self.sched.pending:
                self._observe()
                placed = self.sched.retry_pending(T0 + self.now)
                stop_preempted(self)
                for d in placed:
                    self._placed(int(d.task_id[1:]), d.nodes, d.start_at)
            return
        waiting = []
        for j in self.queue:
            members = None if waiting and self.policy == "fifo" else self._choose(j)  # fifo: nobody passes the head
            if members is None:
                waiting.append(j)
            else:
                self._start(j, members, self.resume.pop(j, 0.0))
        self.queue = waiting

    def _choose(self, j: int) -> list[int] | None:
        n, c = int(self.jobs.nodes[j]), int(self.jobs.cards[j])
        ok = np.flatnonzero(fitting(self.free[:, None], np.array([c]), self.up))  # the one rule (core.feasibility)
        if ok.size < n:
            return None
        if self.policy == "random":
            return sorted(int(x) for x in self.rng.choice(ok, n, replace=False))
        return topology_pick(ok, n, self.cluster.node_site[ok], self.rack[ok])

    # ------------------------------------------------------------- network
    def _observe(self) -> None:
        """The newest epoch's windows into the Scheduler's view, drawn when it reads them (the same
        windows whenever they are drawn: seeded by the epoch)."""
        epoch = int(self.now // self.cfg.epoch_s)
        if self.sched is not None and epoch != self.observed:
            self.observed = epoch
            seed = self.cfg.seed * 1_000_003 + epoch
            observe_epoch(self.net, self.truth, self.uplink, self.cfg.probes, T0 + epoch * self.cfg.epoch_s,
                          seed, self.ahead, seed + 1)

    def _epoch(self) -> None:
        if self.policy in MOVING:  # the worker re-evaluates running tasks on every window
            self._observe()
            if self.running:
                events = self.sched.reschedule(T0 + self.now)
                for ev in events:
                    self._move(int(ev.task_id[1:]), [self.index[x] for x in ev.to_nodes], ev.start_at)
                if events:  # what the moves left behind may take queued work (as the worker retries)
                    self._place_queued()
        self._push(self.now + self.cfg.epoch_s, EPOCH, 0)

    def _move(self, j: int, to: list[int], start_at: float | None = None) -> None:
        """Checkpoint, transfer the state, start again at the target."""
        old = self._stop(j)
        c = self.cluster
        _, gbps = placement_paths([old.members[0], to[0]], c.node_site, c.node_rack, self.truth.site_rtt(),
                                  self.truth.site_gbps(), self.uplink, self.truth.fabric, self.truth.uplink_ratio)
        cost = self.cfg.restart_s + self.cfg.checkpoint_gb * 8 / min(gbps, c.spec.node_gbps)
        self._start(j, to, old.work, start_at and start_at - T0)  # its pause: the ramp's delay, load, restart
        self.running[j].pause += cost - (self.cfg.restart_s if old.work > 0 else 0.0)
        self._reschedule_finish(j)
        self.sched.start(f"j{j}", [c.node_ids[m] for m in to])
        self.out.migrations[j] += 1
        self.out.migration_s[j] += cost

    def _network(self, what: int, pair: int) -> None:
        """Network events: ``what`` 1 reroute on, 2 off, 3 loss burst on, 4 off; ``pair`` a * S + b."""
        k = len(self.cluster.sites)
        a, b = divmod(pair, k)
        if what in (1, 2):
            self.truth.rtt_factor[a, b] = self.truth.rtt_factor[b, a] = self.cfg.reroute_factor if what == 1 else 1.0
        else:
            self.truth.loss[a, b] = self.truth.loss[b, a] = self.cfg.burst_loss if what == 3 else 0.0
        self._refresh_rates()

