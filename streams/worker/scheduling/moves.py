"""Moves in seconds (issue 52): a running task the seconds rule placed (seconds.decided_in_seconds) is
re-evaluated in the currency it was placed in.

What is left of its run where it is — its expected run on its members (core.ect.run_seconds over their
cards and measured paths) less what it has run — or the share of its steps its runner says are not
done (a ``progress`` event; held.Running.left_s) —, at least the policy's ``min_remaining_share`` of it —
is set against the same work on the best other placement that starts now (its own room given back;
the head of the queue's reservation, cordoned and failed nodes, and what its constraints forbid
closed). It moves when the seconds saved exceed the move's own seconds (checkpoint save, transfer,
restore, the data loaded again there, queueing) plus the queue's price on the card-seconds the move
holds, plus core.ect.EQUAL_SHARE of what is left (core.ect.move_gain). Patience, cool-down, failed
and draining nodes as core.reschedule.evaluate has them; the event's composites are for display.

A single-node task's alternatives are every node it fits (one vector per task, after a vectorised
cut: only tasks some fitting node could speed up beyond the band are looked at); a gang's is the
seconds rule's best set that starts now (seconds.Costing.now_best), looked for only when a member
failed or drains, or when the fastest cards it could have in one rack could pay for a move.
"""

from __future__ import annotations

import numpy as np

from core.ect import ONE_RACK, move_gain, run_seconds
from core.feasibility import covers
from core.reschedule import degraded, evaluate, gang_path_state, migration_cost_s
from schemas.sched import RescheduleEvent
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoint_rows, endpoints, load_gb, need
from streams.worker.scheduling.constraints import masked
from streams.worker.scheduling.decision import breakdown
from streams.worker.scheduling.gangs import GangScorer
from streams.worker.scheduling.migration import (
    GangScores,
    drain_due,
    moved,
    own_room,
    spans_dark_path,
)
from streams.worker.scheduling.queue import price_of
from streams.worker.scheduling.seconds import Costing, decided_in_seconds
from streams.worker.scheduling.speeds import speeds_for


def in_seconds(sched, runs: list) -> tuple[list, list]:
    """(the running tasks moved in seconds, the others) — by the placement rule that placed them."""
    if sched.placement_rule != "seconds":
        return [], list(runs)
    memo = sched._cache.get("in seconds")
    if memo is None or memo[0] is not sched.types or len(memo[1]) > 2 * len(runs) + 1000:
        memo = sched._cache["in seconds"] = (sched.types, {})  # task id -> (task object, placed in seconds)
    seen = memo[1]

    def timed(task) -> bool:
        hit = seen.get(task.id)
        if hit is None or hit[0] is not task:
            hit = seen[task.id] = (task, decided_in_seconds(task, sched.types))
        return hit[1]

    mine = [r for r in runs if timed(r.task)]
    ids = {id(r) for r in mine}
    return mine, [r for r in runs if id(r) not in ids]


def all_of(sched, runs: list, nodes: NodeView, now: float) -> list[RescheduleEvent]:
    """Every running task placed in seconds: gangs first (each sees the moves before it), then the
    single-node tasks together. ``nodes``: the view as the ledger stands now."""
    events = []
    for r in (r for r in runs if len(r.nodes) > 1):
        nodes = sched.nodes(now) if nodes is None else nodes
        if (ev := gang(sched, r, nodes, now)) is not None:
            events.append(ev)
            nodes = None
    nodes = sched.nodes(now) if nodes is None else nodes
    return events + singles(sched, [r for r in runs if len(r.nodes) == 1], nodes, now)


def closed_to_moves(sched, nodes: NodeView) -> np.ndarray:
    """bool[N]: where no running task may move: the head's reservation, cordoned and failed nodes."""
    shut = np.asarray(nodes.closed, bool) | ~np.asarray(nodes.available, bool)
    return shut | sched.reserved_mask(nodes)


def _save_restore(r, policy) -> float:
    """A move's least seconds: its checkpoint saved and restored (as measured, else the policy's)."""
    save = r.save_s if np.isfinite(r.save_s) else policy.checkpoint_save_s
    restore = r.restore_s if np.isfinite(r.restore_s) else policy.restore_s
    return float(save + restore)


def singles(sched, runs: list, nodes: NodeView, now: float) -> list[RescheduleEvent]:
    """Single-node tasks placed in seconds: each to the node where it would finish soonest, when that
    pays (see the module); moves of one pass take room from each other."""
    if not runs:
        return []
    shut = closed_to_moves(sched, nodes)
    speeds = [speeds_for(sched, r.task, nodes) for r in runs]  # one array per workload (speeds.py)
    free = nodes.usable.copy()
    cur = np.array([nodes.index[r.nodes[0]] for r in runs])
    work = np.array([r.task.expected_duration_s for r in runs])
    here = work / np.array([s[c] for s, c in zip(speeds, cur.tolist(), strict=True)])
    left = np.array([r.left_s(h, now, sched.policy.min_remaining_share) for r, h in zip(runs, here, strict=True)])
    # the fastest node that fits each distinct need now, for each workload's speeds: no task of that
    # need could gain more
    needs = np.array([need(r.task) for r in runs], np.float32)
    shapes, of = np.unique(needs, axis=0, return_inverse=True)
    fits = [covers(free, s) & ~shut for s in shapes]
    top: dict[tuple, float] = {}
    fastest = np.array([top.setdefault((k, id(sp)), float(sp[fits[k]].max(initial=0.0)))
                        for k, sp in zip(of.ravel().tolist(), speeds, strict=True)])
    cards = needs[:, 0].astype(np.float64)
    price = price_of(sched, runs[0].task, nodes)
    saved, required = move_gain(left, here, work / np.maximum(fastest, 1e-12),
                                [_save_restore(r, sched.policy) for r in runs], cards, price)
    failed = ~nodes.available[cur]
    drained = np.array([drain_due(r, nodes, now) for r in runs]) if nodes.draining.any() else np.zeros(len(runs), bool)
    look = np.flatnonzero((fastest > 0) & ((saved > required) | failed | drained))
    for t in np.setdiff1d(np.arange(len(runs)), look).tolist():  # no better node by the band: streaks reset
        runs[t].streak = 0
    events = []
    for t in look[np.argsort(-(saved - required)[look], kind="stable")].tolist():
        ev = _single(sched, runs[t], nodes, free, shut, speeds[t], now, bool(failed[t]), bool(drained[t]))
        if ev is not None:
            events.append(ev)
    return events


def _single(sched, r, nodes: NodeView, free: np.ndarray, shut: np.ndarray, speed: np.ndarray, now: float,
            failed: bool, drained: bool) -> RescheduleEvent | None:
    task, c = r.task, nodes.index[r.nodes[0]]
    net = sched.network(endpoints([task]), nodes, r.profile)
    costing = Costing(sched, task, net, nodes, now)
    ok = covers(free, costing.need) & ~shut
    ok[c] = False
    ok = np.isfinite(masked(sched.running, task, nodes, free, np.where(ok, 0.0, -np.inf)))
    if not ok.any():
        return None
    here = task.expected_duration_s / speed[c]
    there = task.expected_duration_s / speed
    left = float(r.left_s(here, now, sched.policy.min_remaining_share))
    move_s = migration_cost_s(np.full(len(ok), r.state_gb), net.between_nodes(np.full(len(ok), c),
                                                                                   np.arange(len(ok))),
                              nodes.queue_s, sched.policy, save_s=np.full(len(ok), r.save_s),
                              restore_s=np.full(len(ok), r.restore_s)) + costing.load
    saved, required = move_gain(left, here, there, move_s, costing.cards, costing.price)
    b = int(np.argmax(np.where(ok, saved - required, -np.inf)))
    ev = _decide(sched, r, nodes, [c], [b], float(saved[b]), float(required[b]), float(move_s[b]), now, failed,
                 drained)
    if ev is not None:  # the next moves of this pass see the room it took (its source stays held until it starts)
        free[b] -= costing.need
    return ev


def gang(sched, r, nodes: NodeView, now: float) -> RescheduleEvent | None:
    """A gang placed in seconds: to the seconds rule's best set that starts now, its own room given
    back, when that pays (see the module); only the members that change move."""
    task = r.task
    members = [nodes.index[n] for n in r.nodes]
    usable, drained = own_room(sched, r, nodes, members, now)
    failed = not nodes.available[members].all()
    cut = not failed and spans_dark_path(sched, r, nodes, now)  # its members cannot reach each other
    shut = closed_to_moves(sched, nodes)
    shut[members] = ~nodes.available[members]  # its own live nodes stay open to it
    net = sched.network(endpoints([task]), nodes, r.profile)
    costing = Costing(sched, task, net, nodes, now)
    speed = costing.speed
    here = float(costing.runs(np.array([members]))[0]) if not (failed or cut) else np.inf
    left = float(r.left_s(here, now, sched.policy.min_remaining_share)) if not (failed or cut) else np.inf
    fits = covers(usable, costing.need) & ~shut
    if task.constraints is not None:
        fits = np.isfinite(masked(sched.running, task, nodes, usable, np.where(fits, 0.0, -np.inf)))
    if not (failed or cut or drained) and not _could_pay(sched, r, costing, speed, fits, here, left):
        r.streak = 0
        return None
    alt, _ = costing.now_best(fits, usable)
    if alt is None or set(alt.tolist()) == set(members):
        r.streak = 0
        return None
    there = float(costing.runs(alt[None, :])[0])
    leaving = [m for m in members if m not in alt]
    arriving = [int(m) for m in alt if m not in members]
    move_s = float((migration_cost_s(np.full(len(leaving), r.state_gb), net.between_nodes(leaving, arriving),
                                     nodes.queue_s[arriving], sched.policy, save_s=np.full(len(leaving), r.save_s),
                                     restore_s=np.full(len(leaving), r.restore_s))
                    + costing.load[arriving]).max())
    saved, required = move_gain(left, here, there, move_s, costing.cards, costing.price)
    return _decide(sched, r, nodes, members, [int(m) for m in alt], float(saved), float(required), move_s, now,
                   failed, drained, cut)



def _could_pay(sched, r, costing: Costing, speed: np.ndarray, fits: np.ndarray, here: float, left: float) -> bool:
    """Whether the fastest cards the gang could have now, in one rack, could save more than its least
    move (save and restore) requires: else no set could, and none is looked for."""
    g = r.task.peers
    if int(fits.sum()) < g:
        return False
    slowest_of_fastest = float(np.sort(speed[fits])[-g])
    bound = float(run_seconds(r.task.expected_duration_s, slowest_of_fastest, costing.comm, g, ONE_RACK.ideal_rtt_ms,
                              ONE_RACK.ideal_gbps))
    saved, required = move_gain(left, here, bound, _save_restore(r, sched.policy), costing.cards, costing.price)
    return bool(saved > required)


def _decide(sched, r, nodes: NodeView, members: list[int], to: list[int], saved: float, required: float,
            move_s: float, now: float, failed: bool, drained: bool, cut: bool = False) -> RescheduleEvent | None:
    """core.reschedule.evaluate on one task's seconds (degradation named when a gang's own paths
    degraded against its placement's baseline); the move booked (migration.moved) when it says so."""
    task = r.task
    scored = GangScores(sched, [r], nodes)  # scored on first use: a gang's paths, the display of a move
    deg = np.zeros(1, bool)
    if len(members) > 1 and not failed:
        net, x, t, _, _ = scored.of[task.id]
        p95, loss = gang_path_state(net.p95, net.loss, endpoint_rows(x, t), members, net.from_node("loss", members[0]))
        deg = degraded(np.array([p95]), np.array([r.baseline_p95]), np.array([loss]), sched.policy,
                       np.array([r.alpha]), loss_baseline=np.array([r.baseline_loss]))
    joined = bool((nodes.joined_at[[m for m in to if m not in members]] > r.placed_at).any())
    ev = evaluate(np.zeros(1), np.zeros(1), deg, np.array([joined]), np.array([r.alpha]), np.array([r.streak]),
                  np.zeros(1), np.array([move_s]), np.array([now < r.cooldown_until]), sched.policy,
                  node_failed=np.array([failed]), path_failed=np.array([cut]), drained=np.array([drained]),
                  saved=(np.array([saved]), np.array([required])))
    r.streak = int(ev.streak[0])
    if not ev.move[0]:
        return None
    net, x, t, composite, network = scored.of[task.id]
    rows = endpoint_rows(x, t)
    g = GangScorer(r.alpha, composite.astype(np.float64), x.compute[:, x.kind[t]], net, x.unknown_quality,
                   nodes.energy, task.cost_sensitivity)

    def shown(on: list[int]):
        worth = g.value(on) if len(on) > 1 else float(composite[on[0]])
        return breakdown(g.compute[on].mean(), g.network(network[on[0]], on) if len(on) > 1 else network[on[0]],
                         worth if np.isfinite(worth) else 0.0, r.alpha)

    leaving = sum(m not in to for m in members)
    event = RescheduleEvent(
        task_id=task.id, from_nodes=list(r.nodes), to_nodes=[nodes.ids[m] for m in to], trigger=str(ev.trigger[0]),
        expected_gain_s=round(saved, 3) if np.isfinite(saved) else 0.0, migration_cost_s=round(move_s, 3),
        transfer_gb=round(leaving * (r.state_gb + load_gb(task)), 6), before=shown(members), after=shown(to),
        state_version=sched.version, at=now)
    start_at = moved(sched, r, [nodes.ids[m] for m in to], now, net, rows, to, failed, nodes)
    return event if start_at is None else event.model_copy(update={"start_at": start_at})
