"""The queue: its service order (core.quota.queue_order), retries when capacity may have changed, the
head's reservation with backfill (core/reservation.py), and expiry. A mixin of the Scheduler."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from core.ect import queue_price
from core.feasibility import covers, fitting
from core.quota import deadline_wait, queue_order, starving_tasks
from core.reservation import held_back, node_free_times, reserve
from schemas.sched import Decision, Fallback, Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import need
from streams.worker.scheduling.preemption import may_preempt
from streams.worker.scheduling.why import of_classes

_TASK = attrgetter("task")


@dataclass
class Reservation:
    """Nodes promised to the head of the queue from when the running tasks there are expected to end."""

    task_id: str
    nodes: list[str]
    start: float
    end: float
    priority: int
    starving: bool  # core.quota.starving_tasks (waited past CNSCHED_MAX_WAIT_SECONDS): everyone waits behind it


def expected_end(run, now: float) -> float:
    """When a running task is expected to end: its declared duration less what it has run (now, if overdue)."""
    return now + max(run.task.expected_duration_s - run.ran_for(now), 0.0)


def free_times(sched, task: Task, nodes: NodeView, now: float, usable: np.ndarray | None = None) -> np.ndarray:
    """float64[N]: when each node first has room for one of ``task``'s workers by the running tasks'
    expected ends (``now`` where it has room now; inf where it never does); ``usable``: what is free
    now, if not the view's (a batch's placements so far)."""
    n = need(task)
    feasible = fitting(nodes.capacity, n, nodes.available & ~nodes.closed) & of_classes(task, nodes)
    feasible &= sched.quotas.room(sched.running.values(), task, sched.quotas.team_of(task), nodes)
    at, per, ran_s, placed_at, expected, needs = sched.running.placements(nodes.index)
    # expected_end of every running task at once (the same arithmetic, elementwise)
    ran = ran_s + np.maximum(now - placed_at, 0.0)
    ends = now + np.maximum(expected - ran, 0.0)
    return node_free_times(n, nodes.usable if usable is None else usable, feasible, at, np.repeat(ends, per), needs, now)


def price_of(sched, task: Task, nodes: NodeView) -> float:
    """The queue's price on a card-second (core.ect.queue_price): the tasks waiting besides ``task``
    over the cards of the open, live nodes."""
    waiting = len(sched.pending) - (task.id in sched.pending)
    memo = sched._cache.get("open cards")  # once per view: its arrays are built, never written
    if memo is None or memo[0] is not nodes.available or memo[1] is not nodes.closed or memo[2] is not nodes.capacity:
        open_ = np.asarray(nodes.available, bool) & ~np.asarray(nodes.closed, bool)
        memo = sched._cache["open cards"] = (nodes.available, nodes.closed, nodes.capacity,
                                             float(nodes.capacity[open_, 0].sum()))
    return queue_price(waiting, memo[3])


def reservation_for(sched, task: Task, nodes: NodeView, now: float, starving: bool) -> Reservation | None:
    """The nodes that free first for ``task`` (by the running tasks' expected ends), or None."""
    got = reserve(free_times(sched, task, nodes, now), task.peers)
    if got is None:
        return None
    start, picked = got
    return Reservation(task.id, [nodes.ids[i] for i in picked], start, start + task.expected_duration_s,
                       task.priority, starving)


@dataclass(frozen=True)
class QueuePass:
    """What a queue retry hands Scheduler.decide_many about each task: its shape's code (need per node
    and workers: tasks of one shape fit where each other fits) and whether the head's reservation
    holds it back. A task that cannot be placed on what the pass has left is not decided."""

    shape: np.ndarray  # int64[T]
    behind: np.ndarray  # bool[T]
    kinds: tuple[np.ndarray, list[tuple]] | None = None  # batch.by_profile's: each task's kind code, the kinds


class QueueMixin:
    def blocked(self, task: Task, nodes: NodeView, now: float) -> np.ndarray:
        """bool[N]: reserved nodes ``task`` may not take (it would delay the head of the queue): a
        task behind the head (lower or equal priority, or any while the head starves) that would not
        end before the reservation starts. Read-only (shared by every task held back)."""
        if not self._behind(task, now):
            return np.zeros(len(nodes.ids), bool)
        return self.reserved_mask(nodes)

    def _behind(self, task: Task, now: float) -> bool:
        """Whether the head's reservation holds ``task`` back (see :meth:`blocked`)."""
        res = self.reservation
        if res is None or res.task_id == task.id:
            return False
        return bool(self._behind_all(np.array([[task.priority, task.expected_duration_s, math.nan]]), now)[0])

    def reserved_mask(self, nodes: NodeView) -> np.ndarray:
        """bool[N] the reservation's nodes (none without one), once per reservation and node list.
        Read-only."""
        res, memo = self.reservation, self._cache.get("reserved")
        if memo is None or memo[0] is not res or memo[1] is not nodes.ids:
            mask = np.zeros(len(nodes.ids), bool) if res is None else np.isin(nodes.ids, res.nodes)
            memo = self._cache["reserved"] = (res, nodes.ids, mask)
            memo[2].flags.writeable = False  # handed out as is: nobody may change it
        return memo[2]

    def expire_queued(self, now: float, timeout_s: float) -> list[tuple[Task, Decision]]:
        """Queued tasks that waited longer than ``timeout_s`` (0: never) leave the queue, each with an
        unschedulable decision saying why."""
        if timeout_s <= 0:
            return []
        out = []
        for task_id, p in list(self.pending.items()):
            if p.waited(now) > timeout_s and not p.held:  # a held task waits as long as its operator says
                del self.pending[task_id]
                out.append((p.task, self.queued_decision(p, now, f"expired: queued {p.waited(now):.0f} s without "
                                                                 f"a placement (CNSCHED_QUEUE_TIMEOUT_SECONDS={timeout_s:g})")))
        return out

    def queued_decision(self, p, now: float, reason: str, **more) -> Decision:
        """An unschedulable decision of queued task ``p`` (held.Pending) saying ``reason``, with ``more``
        of its fields (the head's copy ahead: its staging and the nodes it waits for)."""
        t = p.task
        # the alpha its decisions carried (a one-node task's may exceed its type's); else its own or its type's
        alpha = p.alpha if not math.isnan(p.alpha) else t.alpha if t.alpha is not None else self.types[t.type].alpha
        return Decision(task_id=t.id, status="unschedulable", alpha=alpha, network_profile=self._profile(t),
                        state_version=self.version, decided_at=now, fallbacks=[Fallback(node="", reason=reason)],
                        task_type=t.type, submitted_at=t.submitted_at, cards=t.resources.cards, peers=t.peers,
                        restarts=p.restarts, resume_from=p.resume_from, **more)

    def capacity_key(self) -> tuple:
        """What decides whether a queued task could fit now: the inventory and the allocations (not
        the network, which moves scores, never feasibility). Retrying the queue when it is unchanged
        cannot place anything."""
        return (getattr(self.inv, "version", self.version), self.allocation_version, len(self.pending))

    def _ordered(self, nodes: NodeView, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the rows of the queued tasks not held in the pending book, their service order, which of
        them starve). Under ``queue_rule`` "response" a task whose deadline is near counts as
        running no time (it starves once its slack is down to the longest wait), and so does the
        task holding the reservation: the head keeps its place while it waits for its nodes (shorter
        tasks whose ratios grow faster would otherwise take it, and a gang would never start)."""
        book = self.pending
        rows = book.ready()
        if not rows.size:
            return rows, np.zeros(0, np.int64), np.zeros(0, bool)
        table = book.order[rows]  # priority, expected duration, deadline
        # slack_s(task, 0, now) of every task at once (the same arithmetic, elementwise)
        slack = table[:, 2] - now - np.maximum(table[:, 1] - 0.0, 0.0)
        waited = deadline_wait(now - book.submitted[rows], slack, self.max_wait_s)
        shares = self.quotas.shares([p.task for p in book.entries[rows]], list(self.running.values()), nodes) \
            if self.quotas.active else np.zeros(len(rows))
        run = None
        if self.queue_rule == "response":
            with np.errstate(invalid="ignore"):
                run = np.where(slack <= self.max_wait_s, 0.0, table[:, 1])
            res = self.reservation
            if res is not None and res.task_id in book:
                run[rows == book.row_of(res.task_id)] = 0.0
        return (rows, queue_order(table[:, 0], shares, waited, self.max_wait_s, run),
                starving_tasks(waited, self.max_wait_s, run))

    def starving_now(self, now: float) -> int:
        """How many queued tasks (not held) starve (core.quota.starving_tasks): they go first."""
        return int(self._ordered(self.nodes(now), now)[2].sum())

    def queue_order(self, now: float) -> list[Task]:
        """The queued tasks that are not held, in the order they are served."""
        rows, order, _ = self._ordered(self.nodes(now), now)
        return [p.task for p in self.pending.entries[rows[order]]]

    def retry_pending(self, now: float | None = None) -> list[Decision]:
        """Queued tasks in service order; the ones placed now. The first that cannot be placed (nor
        make room by preemption) gets a reservation; the ones after it are backfilled around it.
        Per queued task only arrays are read (a queue of thousands is retried at every change; the
        pending book keeps them)."""
        now = time.time() if now is None else now
        if self.durations is not None:  # a task past its predicted run is planned with its user's figure
            self.durations.overdue(self.running, self.pending, now)
        nodes = self.nodes(now)
        rows, order, starving = self._ordered(nodes, now)  # the last reservation's holder keeps its place
        self.reservation = None
        if not rows.size:
            return []
        book, ranked = self.pending, rows[order]
        queued = book.entries[ranked]
        # a task that fits on too few nodes stays queued without being decided again; tasks of one
        # shape (need per node, workers) are asked about once
        shapes, code = np.unique(book.code[ranked], return_inverse=True)
        fits = covers(nodes.usable[None, :, :], book.shape_need[shapes][:, None, :]) & np.asarray(nodes.available, bool)
        keep = fits.sum(axis=1)[code] >= book.shape_peers[shapes][code]
        if self.preemption and not keep.all():  # without preemption may_preempt says no to all
            run = list(self.running.values())
            room_left = self.quotas.headroom(run, nodes) if self.quotas.active else None
            lowest = min((r.task.priority for r in run), default=None)
            for k in np.flatnonzero(~keep):
                keep[k] = may_preempt(self, queued[k].task, room_left, lowest)
        missing = np.flatnonzero(~keep)
        head = int(missing[0]) if missing.size else len(queued)
        if missing.size:
            self.reservation = reservation_for(self, queued[head].task, nodes, now,
                                               bool(starving[order[head]]))
            self._stage_for_head(queued[head].task, nodes, now)
        # held back by the head's reservation: behind it (after it in the order) and _behind's rule
        behind = (np.arange(len(queued)) > head) & self._behind_all(book.order[ranked], now)
        kept = np.flatnonzero(keep)
        combo = code[kept] * 2 + behind[kept]
        placeable = np.zeros(2 * len(shapes), bool)  # (shape, held back) -> could be placed on the room now
        for c in np.unique(combo):
            room = fits[c // 2] & ~self.reserved_mask(nodes) if c % 2 else fits[c // 2]
            placeable[c] = self.could_hold(queued[kept[np.argmax(combo == c)]].task, room, nodes)
        # what cannot be placed on the room there is now cannot later in this pass: not decided
        take = placeable[combo]
        if self.preemption:
            take |= np.array([self.opted_in(queued[k].task) for k in kept], bool)
        take = kept[take]
        if not take.size:
            return []
        tasks = list(map(_TASK, queued[take]))
        self.waiting_for.clear()
        decided = self.decide_many(tasks, now, queue=QueuePass(code[take], behind[take],
                                                               (book.kind[ranked[take]], book.kinds)))
        self._reserve_for_waiting_gang(decided, tasks, take, head, starving[order])
        return [d for d in decided if d.status == "placed" and d.task_id in self.running]

    def _stage_for_head(self, task: Task, nodes: NodeView, now: float) -> None:
        """The head's data copied ahead to its reservation's site (head_staging.py); the queued decision
        saying so kept for the service to publish (``ahead``; not in the replay, which has no runners)."""
        # it costs with seconds.py, which reads this module
        from streams.worker.scheduling.head_staging import HELD, stage_for_head

        got = stage_for_head(self, task, nodes, now)
        p = self.pending.get(task.id)
        if got and self.audit and p is not None:
            res = self.reservation
            why = f"{HELD}: {', '.join(res.nodes)} free in {res.start - now:.0f} s; its data is copied to " \
                  f"{got[0].target} meanwhile"
            self.ahead.append((task, self.queued_decision(p, now, why, team=task.team, staging=got,
                                                          waits_for=list(res.nodes))))

    def take_ahead(self) -> list[tuple[Task, Decision]]:
        """The queued decisions that carry a copy ahead (:meth:`_stage_for_head`) since the last take."""
        done, self.ahead = self.ahead, []
        return done

    def _reserve_for_waiting_gang(self, decided, tasks, take, head: int, starving: np.ndarray) -> None:
        """A gang that could start now but waits for a closer set (the seconds rule: that completes
        sooner) and comes before the head of the queue holds the reservation, on that very set from
        when it frees (Slurm's ``--switches=N@max-time``, made quantitative): otherwise work behind it
        would take the set's nodes as they free, and the gang, never the head, would wait on."""
        placed = {d.task_id for d in decided if d.status == "placed"}
        for k, t in zip(take.tolist(), tasks, strict=True):
            if k >= head:
                return
            hit = self.waiting_for.get(t.id)
            if hit is not None and t.id not in placed and t.id in self.pending:
                when, members = hit
                self.reservation = Reservation(t.id, members, when, when + t.expected_duration_s, t.priority,
                                               bool(starving[k]))
                return

    def _behind_all(self, facts: np.ndarray, now: float) -> np.ndarray:
        """bool[T]: :meth:`_behind` of tasks of these facts (float64[T, 3]: held.Facts.order), other than the head."""
        res = self.reservation
        if res is None or res.task_id not in self.pending:
            return np.zeros(len(facts), bool)
        outranks = (facts[:, 0] > res.priority) & (not res.starving)
        return ~outranks & held_back(res.start, now, facts[:, 1])
