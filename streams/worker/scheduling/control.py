"""What an operator does to tasks, and what the scheduler says of a waiting one: cancel, hold, release
and a new priority; tasks no node of the cluster could ever take (or a service whose users no probe
measures), turned away at submission; and the
one thing a queued task waits for (as Slurm's ``Reason`` and Kueue's conditions say it). A mixin of the
Scheduler, as the queue and the lifecycle are.

A cancelled task that was placed keeps its nodes booked until its runner confirms it stopped (a
``stopped``, ``finished`` or ``failed`` event) or CNSCHED_START_TIMEOUT_SECONDS pass: the cards are
not given out while the old work may still run on them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.feasibility import covers
from schemas.sched import Decision, Fallback, Task
from streams.adapters.tasks import need
from streams.worker.scheduling import why
from streams.worker.scheduling.constraints import allowed


def down_reason(nodes, i: int, cause: str, now: float, timeout_s: float) -> str:
    """Why a node is down, in words: silent for how long, reported down, or every path lost."""
    age = now - float(nodes.report_at[i])
    said = []
    if bool(nodes.reported_down[i]):
        said.append("it reports itself down")
    elif age > timeout_s:
        said.append(f"no report for {age:.0f} s (CNSCHED_NODE_TIMEOUT_SECONDS {timeout_s:g})")
    if cause in ("network", "both"):
        said.append("every path to it lost")
    return "; ".join(said) or "unavailable"


def maintenance_reason(cmd) -> str:
    """``drain by alice at 2026-12-04 10:00Z, deadline 11:00Z: bad fan`` (UTC)."""
    import datetime as dt

    def when(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%MZ")

    text = f"{cmd.action} by {cmd.by or 'api'} at {when(cmd.at)}"
    if cmd.action == "drain" and cmd.deadline_s is not None:
        text += f", deadline {when(cmd.at + cmd.deadline_s)}"
    return text + (f": {cmd.reason}" if cmd.reason else "")


# what a queued task waits for (TaskEstimate.reason)
HELD, QUOTA, RESOURCES, RESERVATION, RETRYING = "held", "quota", "resources", "reservation", "retrying"
NETWORK, NEVER = "network", "never"


@dataclass
class Waiting:
    """Why a queued task is not placed: ``reason`` (one of the words above), a sentence, and its
    place in the queue's service order (1: next; None while held)."""

    reason: str
    detail: str
    position: int | None


class ControlMixin:
    # ------------------------------------------------------------------ operator actions
    def cancel(self, task_id: str, now: float, by: str | None = None) -> Decision | None:
        """The task leaves the scheduler: a `cancelled` decision (``nodes``: where it runs, to stop
        there; its cards stay booked until the runner confirms, see :meth:`stopped`). None when the
        scheduler does not hold it."""
        task, nodes = self.task_of(task_id), []
        if task is None:
            return None
        if self.pending.pop(task_id, None) is None:
            run = self.running.pop(task_id)
            nodes = run.nodes
            self.stopping[task_id] = now  # the ledger keeps its holds until it stopped
            self.ramps.release(task_id)
        self.made_room.pop(task_id, None)
        if self.reservation is not None and self.reservation.task_id == task_id:
            self.reservation = None
        self.books_changed()
        return self.ended_decision(task, "cancelled", nodes, f"cancelled by {by or 'an operator'}", now)

    def expire_limits(self, now: float) -> list[tuple[Task, Decision]]:
        """Running tasks that ran past their time limit (``time_limit_s``, every placement counted):
        cancelled, the reason saying so — what Slurm's ``--time`` does on Slurm, for every runner."""
        late = [r.task for r in self.running.values()
                if r.task.time_limit_s is not None and r.started and r.ran_for(now) > r.task.time_limit_s]
        return [(t, self.cancel(t.id, now, f"its time limit ({t.time_limit_s:g} s)")) for t in late]

    def stopped(self, task_id: str) -> bool:
        """A cancelled task's runner confirmed it stopped: its cards are free. True if they were held."""
        if self.stopping.pop(task_id, None) is None:
            return False
        self.ledger.release(task_id)
        self.books_changed()
        return True

    def expire_stops(self, now: float, timeout_s: float) -> list[str]:
        """Cancelled tasks whose stop no runner confirmed within ``timeout_s`` (0: wait for ever):
        their cards are freed. The task ids."""
        if timeout_s <= 0:
            return []
        late = [t for t, at in self.stopping.items() if now - at > timeout_s]
        for t in late:
            self.stopped(t)
        return late

    def hold(self, task_id: str) -> bool:
        """A queued task is kept out of placement until released. False unless it is queued."""
        p = self.pending.get(task_id)
        if p is None:
            return False
        p.held = True
        if self.reservation is not None and self.reservation.task_id == task_id:
            self.reservation = None
        self.books_changed()
        return True

    def release(self, task_id: str) -> bool:
        """A held task queues again (placed at the next retry if it fits). False unless it is held."""
        p = self.pending.get(task_id)
        if p is None or not p.held:
            return False
        p.held = False
        self.books_changed()
        return True

    def reprioritise(self, task_id: str, priority: int) -> Task | None:
        """A queued or running task's new priority (its queue order, what it may preempt and be
        preempted by); the task as it is now, or None when the scheduler does not hold it."""
        held = self.running.get(task_id) or self.pending.get(task_id)
        if held is None:
            return None
        held.task = held.task.model_copy(update={"priority": priority})
        self.books_changed()
        return held.task

    def ended_decision(self, task: Task, status: str, nodes: list[str], why: str, now: float) -> Decision:
        """A decision that takes a task out of the scheduler (cancelled), saying why."""
        return Decision(task_id=task.id, status=status, nodes=nodes,
                        alpha=task.alpha if task.alpha is not None else self.types[task.type].alpha,
                        network_profile=self._profile(task), state_version=self.version, decided_at=now,
                        fallbacks=[Fallback(node="", reason=why)], task_type=task.type,
                        submitted_at=task.submitted_at, cards=task.resources.cards, peers=task.peers, team=task.team)

    def node_states(self, nodes, now: float) -> list[tuple[str, str]]:
        """Each node's (state, why): down (failed, silent past CNSCHED_NODE_TIMEOUT_SECONDS, or reported
        down; why: the failure's cause), draining (by an operator, or it reports leaving), cordoned (why:
        the command's action, who, when, deadline and reason, as Slurm's ``sinfo -R`` says it), or up ("")."""
        failed, cause, withheld = self.health(nodes, now)
        cmds = self.maintenance.commands()
        out = []
        for i, node in enumerate(nodes.ids):
            if not nodes.available[i] or failed[i]:
                out.append(("down", down_reason(nodes, i, str(cause[i]), now, self.node_timeout_s)))
            elif nodes.draining[i] or nodes.closed[i]:
                c = cmds.get(node)
                out.append(("draining" if nodes.draining[i] else "cordoned",
                            maintenance_reason(c) if c is not None else "it reports leaving"))
            else:
                out.append(("up", "every path lost, on too many nodes at once: the probes are suspect"
                            if withheld[i] else ""))
        return out

    # ------------------------------------------------------------------ what cannot be
    def impossible(self, task: Task, now: float) -> tuple[str, str] | None:
        """(field, why) when no node of the cluster could ever take ``task`` — counting every node the
        inventory knows, up or down, empty — or its team's maximum is smaller than the task; None
        when it only has to wait (and while the inventory is empty: nodes may not have reported yet)."""
        nodes = self.nodes(now)
        if not nodes.ids:
            return None
        classes = set(task.resources.accel_classes)
        by_class = why.of_classes(task, nodes)
        if not by_class.any():
            return "resources.accel_classes", (f"no node has accelerator class {', '.join(sorted(classes))}; "
                                               f"the classes are {', '.join(sorted(set(nodes.class_names)))}")
        n = need(task)
        cards = nodes.capacity[:, 0][by_class]
        if n[0] > cards.max():
            return "resources.cards", f"no node has {int(n[0])} cards; the largest has {int(cards.max())}"
        fits = covers(nodes.capacity, n) & by_class
        if not fits.any():
            return "resources", "no node has the memory it needs, with its cards"
        fits &= allowed(task, nodes)
        if not fits.any():
            return "constraints", "no node meets its regions and tiers"
        if int(fits.sum()) < task.peers:
            return "peers", f"a gang of {task.peers} needs as many nodes; {int(fits.sum())} could ever take a worker"
        over = self.quotas.beyond_maximum(task)
        return ("team", over) if over else self._unmeasured_origin(task, nodes)

    def _unmeasured_origin(self, task: Task, nodes) -> tuple[str, str] | None:
        """A service's origin no probe measures a path from to any node: its requests could never be
        routed (scaling.origins[i].endpoint, named)."""
        origins = task.scaling.origins if task.scaling is not None else []
        if not origins:
            return None
        profile = task.network_profile or self.types[task.type].profile
        rtt = self.path_table(nodes, profile).gather("p95", [o.probe for o in origins], len(nodes.ids))
        for i, o in enumerate(origins):
            if not np.isfinite(rtt[i]).any():
                return (f"scaling.origins[{i}].endpoint",
                        f"no probe measures a path from {o.probe!r} to any node: its requests could not be routed "
                        "(probe from there, or name the endpoint that does)")
        return None

    # ------------------------------------------------------------------ why it waits
    def waiting(self, task_id: str, now: float, order: list[str] | None = None) -> Waiting | None:
        """What a queued task waits for; None when it is not queued. ``order``: the queue's service
        order (task ids), when the caller asks for many tasks at once."""
        p = self.pending.get(task_id)
        if p is None:
            return None
        if p.held:
            return Waiting(HELD, "held: not placed until released", None)
        order = [t.id for t in self.queue_order(now)] if order is None else order
        position = order.index(task_id) + 1 if task_id in order else None
        task, nodes = p.task, self.nodes(now)
        res = self.reservation
        if res is not None and res.task_id == task_id:
            return Waiting(RESOURCES, f"first in line: nodes {', '.join(res.nodes)} are reserved for it, free in "
                                      f"{max(res.start - now, 0):.0f} s as their tasks are expected to end", position)
        team = self.quotas.team_of(task)
        room = self.quotas.room(self.running.values(), task, team, nodes)
        if len(nodes.ids) and not room.any():
            return Waiting(QUOTA, self.quotas.why_no_room(task, team), position)
        fit = why.fit(task, nodes, room)  # the placement's checks, each node charged to the first it fails
        if fit.never:
            return Waiting(NEVER, f"cannot run on the cluster as it is: {fit.summary()}", position)
        fits = fit.fits
        if int(fits.sum()) < task.peers:
            return Waiting(RESOURCES, fit.summary(), position)
        if res is not None and int((fits & ~self.blocked(task, nodes, now)).sum()) < task.peers:
            return Waiting(RESERVATION, f"the nodes that fit are reserved for {res.task_id}, first in line, "
                                        f"which starts in {max(res.start - now, 0):.0f} s", position)
        if p.far:
            return Waiting(NETWORK, p.far, position)
        return Waiting(RETRYING, "fits now: placed at the next retry", position)
