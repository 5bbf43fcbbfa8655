"""The scheduler's state and its decisions over the worker's network and inventory views: filter -> score ->
rank -> reserve (core.scoring, core.placement); migrations in :mod:`.migration`, messages in :mod:`.decision`,
the network in :mod:`.path_table`. Owned by the worker that holds the single-partition state topics."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from core.failures import FailureRule
from core.feasibility import fitting
from core.metering import DEFAULT_BENCHMARK_WORK, DEFAULT_MODEL_CONVERSION
from core.placement import Placement
from core.quality import Freshness
from core.reschedule import ReschedulePolicy, worst_known
from core.scoring import evolved, task_reasons
from core.vocabulary import DEFAULT_TYPES
from schemas.sched import Decision, RescheduleEvent, Task
from streams.adapters.inventory import NodeView, node_view
from streams.adapters.tasks import endpoint_rows, need
from streams.worker.scheduling import moves
from streams.worker.scheduling.bandwidth import PathBook
from streams.worker.scheduling.batch import QUEUE_CHUNK, BatchScores, by_profile, profile_of
from streams.worker.scheduling.books import PendingBook, RunningBook
from streams.worker.scheduling.constraints import allowed, constrained
from streams.worker.scheduling.control import ControlMixin
from streams.worker.scheduling.decision import Later, Scored, decision, loads_at
from streams.worker.scheduling.durations import Durations
from streams.worker.scheduling.failures import IncidentBook, health
from streams.worker.scheduling.gangs import FAR, by_points
from streams.worker.scheduling.held import Pending, Running
from streams.worker.scheduling.ledger import Ledger, usable
from streams.worker.scheduling.lifecycle import LifecycleMixin, known
from streams.worker.scheduling.maintenance import MaintenanceBook
from streams.worker.scheduling.migration import GangScores, migrate_gang, migrate_singles
from streams.worker.scheduling.net_inputs import NetworkInputs, network_inputs
from streams.worker.scheduling.path_table import PathTable, aged_to, build_path_table, path_losses
from streams.worker.scheduling.preemption import Preemption, may_preempt, plan, preempt
from streams.worker.scheduling.queue import QueueMixin, QueuePass, Reservation
from streams.worker.scheduling.quotas import QuotaBook
from streams.worker.scheduling.ramp import RampBook, power_timing
from streams.worker.scheduling.seconds import Costing, decided_in_seconds
from streams.worker.scheduling.speeds import Speeds
from streams.worker.scheduling.staging import CopyBook, site_of


@dataclass
class Scheduler(QueueMixin, LifecycleMixin, ControlMixin):
    net: object  # streams.worker.state_tables.NetState
    inv: object  # streams.worker.state_tables.Inventory
    margin: float = 0.15
    max_wait_s: float = 600.0
    queue_rule: str = "response"  # the queue's order (core.quota.queue_order): "response" (highest ratio next) or "fifo"
    # "seconds": the placement of least expected completion plus the queue's price on capacity (seconds.py,
    # core.ect); "points": the composite with the packing band and gang closeness below (before issue 52)
    placement_rule: str = "seconds"
    sees_network: bool = True  # False (the replay's compute-only baseline): the seconds rule reads every path as one rack's
    packing_band: float = 20.0  # while tasks wait, a one-node task: among nodes this close to the best, the fullest
    gang_packing_band: float = 2.0  # a gang's next worker: among nodes this close to the best, the fullest
    gang_closeness: float = 0.8  # a gang waits for nodes this close to each other (share of its lead's best; 0: any) ...
    gang_patience: float = 4.0  # ... for at most this many times its expected duration
    node_timeout_s: float = 60.0
    failure_rule: FailureRule = field(default_factory=FailureRule)  # what a network failure needs (core.failures)
    policy: ReschedulePolicy = field(default_factory=ReschedulePolicy)
    conversion: dict = field(default_factory=lambda: DEFAULT_MODEL_CONVERSION)
    benchmark_work: dict = field(default_factory=lambda: DEFAULT_BENCHMARK_WORK)
    running: RunningBook = field(default_factory=RunningBook)
    pending: PendingBook = field(default_factory=PendingBook)
    version: int = 0
    first_seen: dict[str, float] = field(default_factory=dict)
    allocation_version: int = 0
    types: dict = field(default_factory=lambda: dict(DEFAULT_TYPES))  # type defaults, learned alphas included
    forecast_p95: dict = field(default_factory=dict)  # (src, dst) -> forecast worst p95 rtt (preventive mode)
    forecast_version: int = 0
    energy_carbon_weight: float = 0.5
    compute_scope: str = "auto"  # adapters.tasks.compute_column: within a class, across classes, or by the task
    ledger: Ledger = field(default_factory=Ledger)
    incidents: IncidentBook = field(default_factory=IncidentBook)
    quotas: QuotaBook = field(default_factory=QuotaBook)
    preemption: bool = True  # a task that finds no room may take it from work it outranks
    preemption_priority: int | None = None  # without quotas: the priority from which tasks may preempt
    preemptions: list[Preemption] = field(default_factory=list)  # made since the service last took them
    ahead: list = field(default_factory=list)  # (task, queued decision) carrying a copy ahead (head_staging.py), to publish
    reservation: Reservation | None = None  # the head of the queue's nodes and start (queue.py)
    tidal_forecast: dict = field(default_factory=dict)  # tidal team -> cards it is forecast to need soon
    ramps: RampBook = field(default_factory=RampBook)  # power-aware starts per site (CNSCHED_SITE_RAMP_LIMITS)
    path_book: PathBook = field(default_factory=PathBook)  # bandwidth placements booked on paths (bandwidth.py)
    copies: CopyBook = field(default_factory=CopyBook)  # named data staged at the sites' stores (staging.py)
    services: dict = field(default_factory=dict)  # service id -> scheduling.services.Service (elastic)
    freshness: Freshness | None = field(default_factory=Freshness)  # how paths age (None: never)
    _cache: dict = field(default_factory=dict)  # derived state by kind: (key, value) (_cached; the reservation's mask)
    made_room: dict = field(default_factory=dict)  # task id -> the tasks preempted to place it (incidents say so)
    stopping: dict = field(default_factory=dict)  # cancelled task id -> when: its cards held until it stopped
    maintenance: MaintenanceBook = field(default_factory=MaintenanceBook)  # cordoned and draining nodes
    audit: bool = True  # decisions carry candidates, rejections, compute-only (the audit trail; off in the replay)
    durations: Durations | None = field(default_factory=Durations)  # runs from history (None: users' figures)
    speeds: Speeds | None = field(default_factory=Speeds)  # workloads' measured card speeds (None: the metering's)
    comm_of: dict = field(default_factory=dict)  # task id -> its true communication share (the replay's oracle-ect)
    waiting_for: dict = field(default_factory=dict)  # gang id -> (when, nodes) of the closer set it waits for
    on_touch: object = None  # called after every change (the worker's rescoring loop waits on it)

    def __post_init__(self) -> None:
        self.quotas.books_key = lambda: (self.allocation_version, getattr(self.inv, "version", None))

    def touch(self) -> None:
        self.version += 1
        if self.on_touch is not None:
            self.on_touch()

    def books_changed(self) -> None:
        """What tasks may take has changed (allocations, quotas): derived state is rebuilt."""
        self.allocation_version += 1
        self.touch()

    def _cached(self, key, build):
        """Derived state per version of its inputs: decisions in a burst share one build."""
        hit = self._cache.get(key[0])
        if hit is not None and hit[0] == key:
            return hit[1]
        value = build()
        self._cache[key[0]] = (key, value)
        return value

    # ------------------------------------------------------------------------------ state
    def nodes(self, now: float) -> NodeView:
        """The inventory as arrays (rebuilt when it changes, at most once a second for the timeouts), with
        what is usable after the ledger's holds (every call; ledger.usable: the headroom on reports)."""
        # an infinite node timeout (the replay's nodes never go silent) makes the view timeless
        key = ("nodes", getattr(self.inv, "version", None), int(now) if math.isfinite(self.node_timeout_s) else 0)
        base = self._nodes(now) if key[1] is None else self._cached(key, lambda: self._nodes(now))
        base = evolved(base, at=now)  # the time its paths are aged to
        n = len(base.ids)
        allocated = self.ledger.allocated(base.index, n)
        reports = ~np.isnan(base.reported_free).all()  # only a node's own report needs the holds since it
        since = self.ledger.allocated(base.index, n, since=base.report_at) if reports else allocated
        free = usable(base.capacity.astype(np.float64), allocated, base.reported_free, since, now - base.report_at,
                      self.margin, self.node_timeout_s)
        failed, _, _ = self.health(base, now)  # a node whose every path is lost takes nothing either
        closed, draining, since, due = self.maintenance.arrays(base.ids, base.leaving, now)
        free[closed] = 0.0  # cordoned, draining or leaving: no new work
        return evolved(base, usable=free, available=base.available & ~failed, closed=closed,
                                   draining=draining, drain_since=since, drain_due=due)

    def health(self, nodes: NodeView, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(failed, cause, withheld) of every node (failures.health over the paths' losses as a path table
        holds them, no profile's quality needed), once per version of the views and second
        (decisions and the watch share it)."""
        return self.judged(nodes, now)[:3]

    def judged(self, nodes: NodeView, now: float) -> tuple:
        """failures.health's whole answer: (failed, cause, withheld, dark paths), cached as health says."""
        def build():
            paths, *judged = path_losses(self.net.columns(), nodes.ids, nodes.racks, nodes.rack_aliases,
                                         aged_to(nodes.at, self.freshness), self.freshness, self.failure_rule)
            return health(nodes, paths, judged[0], now, self.node_timeout_s, *judged[1:], self.failure_rule)

        versions = (getattr(self.net, "version", None), getattr(self.inv, "version", None))
        if None in versions:
            return build()
        second = int(now) if math.isfinite(self.node_timeout_s) else 0
        return self._cached(("health", versions, second, tuple(nodes.ids)), build)

    def _nodes(self, now: float) -> NodeView:
        return node_view(self.inv.records(), self.conversion, self.benchmark_work, now, self.node_timeout_s,
                         self.first_seen, self.energy_carbon_weight)

    def path_table(self, nodes: NodeView, profile: str) -> PathTable:
        """The path table of a profile, built once per version of the network view and forecasts, and
        again as paths age (``freshness``: at most 20 times over its aging span), aged to the time of
        the node view (``nodes.at``: the decision's, rescoring's or watch's ``now``)."""
        version = getattr(self.net, "version", None)
        at = aged_to(nodes.at, self.freshness)

        def build() -> PathTable:
            return build_path_table(self.net.columns(), nodes.ids, profile, self.forecast_p95, nodes.racks,
                                    nodes.rack_aliases, at, self.freshness)

        if version is None:
            return build()
        return self._cached((("paths", profile), (version, self.forecast_version, at), tuple(nodes.ids)), build)

    def network(self, endpoint_ids: list[str], nodes: NodeView, profile: str) -> NetworkInputs:
        """The profile's network inputs for these endpoints, gathered once per path table and node
        list (rescoring asks for the same endpoints for every gang and group)."""
        pt = self.path_table(nodes, profile)
        hit = pt.inputs.get(key := tuple(endpoint_ids))
        if hit is not None and hit[0] is nodes.ids and hit[1] is nodes.link_gbps:
            return hit[2]
        made = network_inputs(pt, endpoint_ids, nodes)
        pt.inputs[key] = (nodes.ids, nodes.link_gbps, made)
        return made

    # --------------------------------------------------------------------------- decide
    def decide(self, task: Task, now: float | None = None, reserve=None, exclude: list[str] = ()) -> Decision:
        """Filter, score, rank, reserve; ``exclude``: nodes not to try (they refused the task)."""
        return self.decide_many([task], now, reserve, exclude)[0]

    def decide_many(self, tasks: list[Task], now: float | None = None, reserve=None,
                    exclude: list[str] = (), queue: QueuePass | None = None) -> list[Decision]:
        """Decide ``tasks`` in this order, each seeing what the ones before it took: one node view,
        one kernel call per network profile for all of them (scores do not depend on what is free;
        feasibility is checked again at each reservation), then a placement each. ``queue``: a retry's
        pass (queue.QueuePass): a task that no longer fits on enough nodes stays queued, undecided."""
        now = time.time() if now is None else now
        if self.durations is not None and queue is None:  # a new task is planned with its predicted run
            tasks = [t if t.id in self.running or t.id in self.pending else self.durations.planned(t) for t in tasks]
        nodes = self.nodes(now)
        if exclude:
            nodes = dataclasses.replace(nodes, available=nodes.available & ~np.isin(nodes.ids, list(exclude)))
        usable = nodes.usable.copy()  # what each placement of the batch leaves to the next
        # a queue's retry places few of the tasks it is given: they are scored as it reaches them
        scores = by_profile(self, tasks, nodes, *((QUEUE_CHUNK, queue.kinds) if queue is not None else (None, None)))
        reserved = self.reserved_mask(nodes) if queue is not None and queue.behind.any() else None
        holds = reserved is not None and bool(reserved.any())  # a task held back keeps off some node
        if queue is not None:  # as Python values: the loop reads one of each per task
            shapes, behind = queue.shape.tolist(), (queue.behind if holds else np.zeros(len(tasks), bool)).tolist()
            nowhere = np.zeros(len(nodes.ids), bool)
            nowhere.flags.writeable = False  # shared by the tasks not held back (read-only, as blocked's)
        out, may = [], {}  # may: (shape, held back) -> could be placed on ``usable`` as it is now
        later = Later()  # the decisions' candidates, built after the placements
        for j, task in enumerate(tasks):
            if queue is None:
                held = self.blocked(task, nodes, now)
            else:
                # a queued task that cannot be placed on what is left (off the head's reservation)
                # stays as it is, undecided: the decision could only say so again
                held_back = behind[j]
                key = (shapes[j], held_back)
                ok = may.get(key)
                if ok is False and not self.preemption:  # most of a long queue: nothing else to ask
                    continue
                held = reserved if held_back else nowhere
                if ok is None:
                    ok = may[key] = self._may_place(task, usable, nodes, held)
                if not ok and not (self.preemption and may_preempt(self, task)):
                    continue
            b, t = scores(j)
            out.append(self._place_one(task, b, t, nodes, usable, reserve, now, held, later))
            may.clear()  # what it took (or gave back) changes what the next ones may
        later.fill()
        return out

    def _may_place(self, task: Task, usable: np.ndarray, nodes: NodeView, held: np.ndarray) -> bool:
        return self.could_hold(task, fitting(usable, need(task), nodes.available) & ~held, nodes)

    def could_hold(self, task: Task, room: np.ndarray, nodes: NodeView) -> bool:
        """Whether ``task`` could be placed at all when ``room`` (bool[N]) are the nodes with room for
        one of its workers: at least ``peers`` of them. A placement rule that asks more overrides it
        (the replay's topology baseline: one site holds the gang)."""
        return int(room.sum()) >= task.peers

    def opted_in(self, task: Task) -> bool:
        """Whether ``task`` may preempt at all: with team quotas, by their rules; without, only when it
        says so (``preempts``) or its priority class does (CNSCHED_PREEMPTION_PRIORITY) — a long
        training run is not to be preempted casually by any higher number."""
        if self.quotas.active:
            return True
        return task.preempts or (self.preemption_priority is not None and task.priority >= self.preemption_priority)

    def _profile(self, task: Task) -> str:
        return profile_of(task, self.types)

    def _attempt(self, task: Task, b: BatchScores, t: int, nodes: NodeView, usable: np.ndarray, reserve,
                 quota_ok: np.ndarray, held: np.ndarray, now: float) -> tuple:
        """(filter reasons, scores, placement) of one try on ``usable``; ``held``:
        nodes reserved for the head of the queue."""
        alpha, x, net = b.alphas[t], b.x, b.net
        # what the batch's earlier placements took is infeasible now (the kernel saw the batch's start)
        reasons = task_reasons(x, t, usable, quota_ok, held, nodes.closed)
        if task.constraints is not None or task.peers > 1:  # constraints; a gang in one cluster
            reasons = constrained(self.running, task, nodes, usable, reasons, b.composite[t])
        fits = reasons == 0
        s = Scored(alpha, np.where(fits, b.composite[t], -np.inf), nodes.compute[:, x.kind[t]], b.network[t],
                   loads_at(x, t, b.load_rows))
        return reasons, s, self.placement(task, s, net, x.unknown_quality, nodes, usable, reserve, now)

    def placement(self, task: Task, s: Scored, net, unknown_quality: float, nodes: NodeView, usable: np.ndarray,
                  reserve, now: float) -> Placement:
        """Where ``task`` goes among the nodes its scores allow (``s.composite``: -inf where filtered): by
        the seconds rule (seconds.py) or the points rule (gangs.by_points). The replay's topology baseline
        overrides this one step (streams/replay/baselines.py) and shares everything else."""
        if self.placement_rule == "seconds" and decided_in_seconds(task, self.types):
            costing = Costing(self, task, net, nodes, now)
            ok = np.isfinite(s.composite)
            return costing.single(ok, usable, reserve) if task.peers == 1 else costing.gang(self, ok, usable, reserve)
        return by_points(self, task, s, net, unknown_quality, nodes, usable, reserve, now)

    def _place_one(self, task: Task, b: BatchScores, t: int, nodes: NodeView, usable: np.ndarray, reserve,
                   now: float, held: np.ndarray, later: Later | None = None) -> Decision:
        """``held``: bool[N] nodes reserved for the head of the queue that ``task`` may not take."""
        team = self.quotas.team_of(task)
        quota_ok = self.quotas.room(self.running.values(), task, team, nodes)
        reasons, s, p = self._attempt(task, b, t, nodes, usable, reserve, quota_ok, held, now)
        if not p.placed and self.preemption and team is not None and self.opted_in(task) and \
                (pl := plan(self, task, b.x, t, nodes, usable, team, quota_ok & ~held & allowed(task, nodes),
                            now)) is not None:
            for victim, why in zip(pl.victims, pl.reasons, strict=True):
                preempt(self, victim, task.id, why, now)
            self.made_room[task.id] = list(pl.victims)
            # scored again where the victims were (the batch's kernel saw those nodes full)
            nodes = dataclasses.replace(self.nodes(now), available=nodes.available)
            usable[:] = nodes.usable  # what the victims held is free for the rest of the batch too
            b, t = BatchScores(self, [task], nodes, b.profile), 0
            quota_ok = self.quotas.room(self.running.values(), task, team, nodes)
            reasons, s, p = self._attempt(task, b, t, nodes, usable, reserve, quota_ok, held, now)
        alpha, x, net = b.alphas[t], b.x, b.net
        if p.placed:
            if self.reservation is not None and self.reservation.task_id == task.id:
                self.reservation = None
            prior = self.pending.pop(task.id, None)  # a re-queued task keeps its restarts and checkpoint
            # the task's own paths (its endpoints) at placement: what later p95s are compared with
            rows = endpoint_rows(x, t)
            at = np.ix_(rows, p.nodes)  # every endpoint path at every member: the worst known of each
            run = Running(task, [nodes.ids[i] for i in p.nodes], alpha, b.profile, now, worst_known(net.p95[at]),
                          baseline_loss=worst_known(net.loss[at]), seen_window_end=worst_known(net.end[at]),
                          seen_forecast_version=self.forecast_version,
                          restarts=prior.restarts if prior else 0,
                          checkpoint_at=prior.resume_from if prior and prior.resume_from else math.nan)
            timing = power_timing(self, run, nodes, p.nodes, now)
            self.add_running(run)
        else:
            waiting = self.pending.setdefault(task.id, Pending(task, task.submitted_at or now, queued_at=now))
            waiting.far = next((why for n, why in p.fallbacks if n < 0 and why.startswith(FAR)), "")
            waiting.alpha = alpha  # what its decisions say while it waits (and its expiry, queue.py)
            timing = {}
        d = decision(task, b.profile, s, nodes, p, reasons, b.compute_only[t] if self.audit else None, self.version, now,
                     self.audit, later)
        # what it staged at its site, or ahead where it waits (carried again by a placement there)
        timing.update(self.copies.take(task.id, p.placed and self.copies.store_of(site_of(nodes, p.nodes))))
        if timing:
            d = d.model_copy(update=timing)
        queued = self.pending.get(task.id)
        run = self.running.get(task.id) if p.placed else None
        if run is not None and (run.restarts or math.isfinite(run.checkpoint_at)):  # resumed (failed, preempted)
            d = d.model_copy(update={"restarts": run.restarts, "resume_from": known(run.checkpoint_at)})
        elif queued is not None and (queued.restarts or queued.resume_from is not None):
            d = d.model_copy(update={"restarts": queued.restarts, "resume_from": queued.resume_from})
        return d

    def add_running(self, run: Running) -> None:
        """A task runs (placed now, or restored after a restart): it holds its nodes in the ledger."""
        self.running[run.task.id] = run
        self.ledger.release(run.task.id)
        self.ledger.book(run.task.id, run.nodes, need(run.task), run.placed_at)
        self.books_changed()

    def task_of(self, task_id: str) -> Task | None:
        """A running or queued task."""
        held = self.running.get(task_id) or self.pending.get(task_id)
        return None if held is None else held.task

    def end(self, task_id: str) -> bool:
        """The task finished, failed or was withdrawn: its holds are released. True if it ran."""
        ran = self.running.pop(task_id, None) is not None
        self.pending.pop(task_id, None)
        self.made_room.pop(task_id, None)
        self.ledger.release(task_id)
        self.ramps.release(task_id)
        self.path_book.release(task_id)
        if ran:
            self.books_changed()
        return ran

    # ------------------------------------------------------------------------ reschedule
    def reschedule(self, now: float | None = None) -> list[RescheduleEvent]:
        now = time.time() if now is None else now
        if not self.running:
            return []
        nodes = self.nodes(now)  # each gang sees the moves before it (the ledger, read again after a move)
        timed, runs = moves.in_seconds(self, [r for r in self.running.values() if all(n in nodes.index for n in r.nodes)])
        events = moves.all_of(self, timed, nodes, now)  # placed in seconds: moved in seconds
        nodes = self.nodes(now) if events else nodes
        singles = [r for r in runs if len(r.nodes) == 1]
        gangs = [r for r in runs if len(r.nodes) > 1]
        view, scored = nodes, None
        for k, r in enumerate(gangs):
            view = self.nodes(now) if view is None else view
            scored = GangScores(self, gangs[k:], view) if scored is None else scored  # again after a move
            if (ev := migrate_gang(self, r, view, now, scored)) is not None:
                events.append(ev)
                view = scored = None
        events += migrate_singles(self, singles, now, view)
        if events:
            self.books_changed()
        return events

