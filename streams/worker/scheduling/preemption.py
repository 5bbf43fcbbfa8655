"""Preemption: a task that finds no room may take it from running work it outranks (core/quota.py:
a higher priority, or a team within its guarantee reclaiming borrowed cards). The victims lose least:
the cards x seconds since their last checkpoint. They go back to the queue and resume from that
checkpoint; each one is recorded (who, by whom, why, the work it cost)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from core.quota import borrowed, choose_victims, eligible_victims
from core.scoring import filter_reasons
from schemas.sched import Decision, Fallback
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import need
from streams.worker.scheduling.held import Pending


@dataclass
class Preemption:
    task_id: str  # the victim
    by: str  # the task it made room for
    team: str
    nodes: list[str]
    reason: str  # "priority" (outranked) or "reclaim" (borrowed cards taken back)
    work_lost_s: float  # task time since its last checkpoint (since placement when none)
    card_seconds_lost: float
    at: float
    alpha: float = 0.5
    profile: str = "balanced"
    resume_from: float | None = None


@dataclass
class Plan:
    victims: list[str]
    reasons: list[str]


def plan(sched, task, x, t: int, nodes: NodeView, usable: np.ndarray, team: int, quota_ok: np.ndarray,
         now: float) -> Plan | None:
    """The victims that make room for ``task`` (row ``t`` of the scoring inputs ``x``), or None."""
    # never what this same pass placed (its placement is not even published yet)
    run = [r for r in sched.running.values()
           if r.nodes and r.placed_at < now and all(n in nodes.index for n in r.nodes)]
    if not run:
        return None
    book = sched.quotas
    g, _ = book.arrays(nodes.class_names)
    qu = book.use(run, nodes.index, nodes.node_class, len(nodes.class_names))
    lent = borrowed(qu.team, qu.cls, qu.cards, qu.placed_at, g) if book.active else np.zeros(len(run), bool)
    # where the task could run were the room made: every filter but what is free
    static = filter_reasons(dataclasses.replace(x, usable=nodes.capacity.astype(x.usable.dtype)), t) == 0
    feasible = static & quota_ok & nodes.available
    if not feasible.any():
        return None
    cards = task.resources.cards * task.peers
    if team >= 0:  # reclaiming on a node: the team stays within its guarantee of the node's class
        cls = nodes.node_class
        reclaim = (qu.use[team, cls] + cards <= g[team, cls]) & (qu.use[team, -1] + cards <= g[team, -1])
    else:
        reclaim = np.zeros(len(nodes.ids), bool)
    vprio = np.array([r.task.priority for r in run])
    same = qu.team == team
    # a deferrable task is never preempted once pausing it could cost its deadline (its slack is down
    # to the longest a starving task waits)
    kept = np.array([r.deadline_near(now, sched.max_wait_s) for r in run], bool)
    rows = np.stack([eligible_victims(task.priority, False, same, vprio, lent, book.active) & ~kept,
                     eligible_victims(task.priority, True, same, vprio, lent, book.active) & ~kept])
    if not rows.any():
        return None
    lost = np.array([r.work_lost(now) for r in run])
    frees = np.stack([need(r.task) for r in run]).astype(np.float64)
    chosen = choose_victims(need(task), task.peers, usable, feasible, [[nodes.index[n] for n in r.nodes] for r in run],
                            frees, qu.cards * lost, rows, reclaim.astype(np.int64))
    if chosen is None or not chosen[1]:
        return None
    victims = chosen[1]
    nodes_of = set(chosen[0])  # borrowed cards taken back where the task stays within its guarantee
    why = ["reclaim" if lent[v] and any(reclaim[n] for n in nodes_of) else "priority" for v in victims]
    return Plan([run[v].task.id for v in victims], why)


def preempt(sched, victim: str, by: str, reason: str, now: float) -> Preemption | None:
    """Stop a running task to make room for ``by`` (a task id, or ``tidal:<team>``): it goes back to the queue and resumes from its
    last checkpoint (a preemption is not a failure: its restarts stay as they were)."""
    run = sched.running.get(victim)
    if run is None:
        return None
    lost = run.work_lost(now)
    sched.end(victim)
    checkpoint = run.checkpoint_at if np.isfinite(run.checkpoint_at) else None
    sched.pending[victim] = Pending(run.task, run.task.submitted_at or now, run.restarts, checkpoint, queued_at=now,
                                    alpha=run.alpha)
    rec = Preemption(victim, by, run.task.team, list(run.nodes), reason, lost,
                     lost * run.task.resources.cards * len(run.nodes), now, run.alpha, run.profile, checkpoint)
    sched.preemptions.append(rec)
    return rec


def may_preempt(sched, task, headroom: np.ndarray | None = None, lowest: float | None = None) -> bool:
    """Whether preemption could make room for ``task`` at all (cheap: before planning it): running
    work of a lower priority, or its team within its guarantee (it may reclaim borrowed cards).
    ``headroom`` (each team's guaranteed less used cards) and ``lowest`` (the lowest running
    priority) may be passed in when many tasks are asked about at once."""
    if not sched.preemption or not sched.running or not sched.opted_in(task):
        return False
    if lowest is None:
        lowest = min(r.task.priority for r in sched.running.values())
    if lowest < task.priority:
        return True
    team = sched.quotas.team_of(task)
    if not (sched.quotas.active and team is not None and team >= 0):
        return False
    if headroom is None:
        headroom = sched.quotas.headroom(list(sched.running.values()), sched.nodes(time.time()))
    return bool(headroom[team] >= task.resources.cards * task.peers)


def preempted_decision(p: Preemption, task, version: int) -> Decision:
    """The victim's record on sched.decisions: its runner stops it; it resumes from its checkpoint
    once placed again."""
    cause = {"priority": "a higher priority", "reclaim": "its team reclaims borrowed cards",
             "tidal": "the lending team's forecast peak is near"}[p.reason]
    why = (f"preempted by {p.by} ({cause}); "
           f"{p.work_lost_s:.0f} s of work since its last checkpoint lost")
    return Decision(task_id=p.task_id, status="preempted", nodes=p.nodes, alpha=p.alpha, network_profile=p.profile,
                    fallbacks=[Fallback(node="", reason=why)], state_version=version, decided_at=p.at,
                    task_type=task.type, submitted_at=task.submitted_at, cards=task.resources.cards, peers=task.peers,
                    cost_sensitivity=task.cost_sensitivity, resume_from=p.resume_from, preempted_by=p.by, team=task.team,
                    work_lost_s=round(p.work_lost_s, 3))


def tidal_reclaim(sched, now: float) -> list[Preemption]:
    """Before a tidal team's forecast peak (``sched.tidal_forecast``: team -> cards it is forecast to
    hold within the lead time), take back what deferrable tasks borrowed: when the cards free now fall
    short of what the team will need (up to its guarantee), deferrable borrowers are preempted, the ones
    that lose least (latest checkpoint) first."""
    book = sched.quotas
    if not sched.tidal_forecast or not book.active or not sched.running:
        return []
    nodes = sched.nodes(now)
    g, _ = book.arrays(nodes.class_names)
    run = list(sched.running.values())
    qu = book.use(run, nodes.index, nodes.node_class, len(nodes.class_names))
    lent = borrowed(qu.team, qu.cls, qu.cards, qu.placed_at, g)
    free = float(nodes.usable[nodes.available, 0].sum())
    out = []
    for t in np.flatnonzero(book.tidal()):
        want = min(sched.tidal_forecast.get(book.teams[t], 0.0), g[t, -1]) - qu.use[t, -1]
        short = want - free
        if short <= 0:
            continue
        takers = [v for v in range(len(run)) if run[v].task.deferrable_until is not None and lent[v]
                  and qu.team[v] != t and run[v].task.id in sched.running
                  and not run[v].deadline_near(now, sched.max_wait_s)]
        for v in sorted(takers, key=lambda v: (qu.cards[v] * run[v].work_lost(now), v)):
            if short <= 0:
                break
            rec = preempt(sched, run[v].task.id, f"tidal:{book.teams[t]}", "tidal", now)
            if rec is not None:
                out.append(rec)
                short -= qu.cards[v]
                free += qu.cards[v]
    return out

