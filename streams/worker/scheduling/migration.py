"""Migrations: running tasks re-evaluated against the best other placement under
core.reschedule's policy (gain in points, degradation or a joined node as the trigger, patience,
expected gain against migration cost, cool-down). Single-node tasks are evaluated together per
network profile (one kernel call per group); a gang is re-placed as a gang and only the members
that change move."""

from __future__ import annotations

import numpy as np

from core.energy import blend
from core.feasibility import covers
from core.placement import place
from core.reschedule import (
    Evaluation,
    better,
    degraded,
    endpoint_worst,
    evaluate,
    gang_path_state,
    migration_cost_s,
    news,
    remaining_s,
    worst_known,
    worst_loss_per_task,
    worst_per_task,
)
from core.scoring import evolved, score_parts
from schemas.sched import RescheduleEvent
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoint_rows, endpoints, load_gb, need, scoring_inputs
from streams.worker.scheduling import steady
from streams.worker.scheduling.constraints import masked
from streams.worker.scheduling.decision import breakdown
from streams.worker.scheduling.gangs import GangScorer
from streams.worker.scheduling.ledger import MIGRATING
from streams.worker.scheduling.ramp import draw_of


def moved(sched, run, to_nodes: list[str], now: float, net, rows: np.ndarray, cols: list[int],
          source_failed: bool = False, nodes: NodeView | None = None) -> float | None:
    """Book a move: the ledger holds the new nodes (migrating) and keeps the ones it leaves until the
    runner reports it started at the target (released at once when they failed); new placement time,
    cool-down, and the baselines of its paths at the new nodes (p95, loss, newest window). What a
    rollback needs is kept in ``run.rollback``. With site ramp limits, the power the move adds at a
    site (its target's draw less what its source stops drawing there) is booked: the start time
    returned when it is later than now."""
    leaving = [n for n in run.nodes if n not in to_nodes]
    if sched.ramps.limits and nodes is not None:
        cards = run.task.resources.cards
        up = draw_of(nodes, [nodes.index[n] for n in to_nodes if n not in run.nodes], cards)
        down = {} if source_failed else draw_of(nodes, [nodes.index[n] for n in leaving if n in nodes.index], cards)
        run.start_at = sched.ramps.book({s: mw - down.get(s, 0.0) for s, mw in up.items()
                                         if mw - down.get(s, 0.0) > 1e-12}, now)
        sched.ramps.phase(run.task.id, draw_of(nodes, [nodes.index[n] for n in to_nodes], cards))  # same slot
    sched.ledger.book(run.task.id, [n for n in to_nodes if n not in run.nodes], need(run.task), now, MIGRATING)
    if source_failed or not run.started:
        sched.ledger.release(run.task.id, leaving)
        run.rollback = None
    else:
        run.rollback = (list(run.nodes), run.baseline_p95, run.baseline_loss, run.seen_window_end, leaving)
    run.nodes = to_nodes
    run.ran_s = run.ran_for(now)
    run.placed_at = now
    run.cooldown_until = now + sched.policy.cooldown_s
    run.moves += 1
    run.started = False  # the runner starts it again at the target
    run.baseline_p95 = worst_known([endpoint_worst(net.p95, rows, c) for c in cols])
    run.baseline_loss = worst_known([endpoint_worst(net.loss, rows, c) for c in cols])
    run.seen_window_end = worst_known([endpoint_worst(net.end, rows, c) for c in cols])
    return round(run.start_at, 3) if run.start_at > now else None


def drain_due(run, nodes: NodeView, now: float) -> bool:
    """Whether a task on a draining node is to move now: it has not started there, it saved a
    checkpoint since the drain began, or the drain's deadline has passed."""
    rows = [nodes.index[n] for n in run.nodes if n in nodes.index]
    if not rows or not nodes.draining[rows].any():
        return False
    since, due = float(nodes.drain_since[rows].min()), float(nodes.drain_due[rows].min())
    return not run.started or run.checkpoint_at >= since or now >= due


def migrate_singles(sched, runs: list, now: float, nodes: NodeView | None = None) -> list[RescheduleEvent]:
    """Single-node tasks, one group per network profile; each group sees what the moves of the
    groups before it took (the ledger, read again after a move). ``nodes``: the node view as the
    ledger stands now, if the caller has it."""
    events = []
    for profile in sorted({r.profile for r in runs}):
        nodes = sched.nodes(now) if nodes is None else nodes
        group = [r for r in runs if r.profile == profile and r.nodes[0] in nodes.index]
        moves = _migrate_group(sched, nodes, group, profile, now) if group else []
        if moves:
            events += moves
            nodes = None
    return events


def _migrate_group(sched, nodes: NodeView, group: list, profile: str, now: float) -> list[RescheduleEvent]:
    if steady.still_quiet(sched, nodes, group, profile):  # quiet at its last evaluation, and still
        return []
    tasks = [r.task for r in group]
    eps = endpoints(tasks)
    net = sched.network(eps, nodes, profile)
    alphas = [r.alpha for r in group]
    x = scoring_inputs(tasks, alphas, nodes, eps, net, sched.types, scope=sched.compute_scope)
    w = np.array([r.task.cost_sensitivity for r in group])
    # one kernel call: every node's composite as if the task needed nothing (it holds its own node:
    # what staying is worth), and elsewhere the same values where its need fits (the kernel's own
    # comparisons, in float32) — what score_all with its need would give
    held, network = score_parts(evolved(x, need=np.zeros_like(x.need)))
    fits = covers(np.asarray(x.usable, np.float32)[None, :, :], np.asarray(x.need, np.float32)[:, None, :])
    s = blend(np.where(fits, held, np.float32(-np.inf)), w, nodes.energy)
    s_now = blend(held, w, nodes.energy)
    cur = np.array([nodes.index[r.nodes[0]] for r in group])
    t_idx = np.arange(len(group))
    current = s_now[t_idx, cur].astype(np.float64)
    current = np.where(np.isfinite(current), current, 0.0)  # a failed node is worth nothing
    s[t_idx, cur] = -np.inf
    for t, r in enumerate(group):  # residency, tiers, spread: a move keeps them too
        if r.task.constraints is not None:
            s[t] = masked(sched.running, r.task, nodes, nodes.usable, s[t])
    if sched.reservation is not None:  # never onto the head of the queue's reservation
        s[:, sched.reserved_mask(nodes)] = -np.inf
    best_node = np.argmax(s, axis=1)
    best = s[t_idx, best_node].astype(np.float64)
    if _quiet(sched, nodes, group, cur, best, current, now):  # no task could move: evaluate's verdict, directly
        _stay(sched, nodes, group, profile, x, net, eps, cur, best - current, s_now - current[:, None])
        return []
    steady.forget(sched, profile)
    ev = _evaluate_group(sched, nodes, group, x, net, eps, profile, cur, best_node, current, best, now)
    events = []
    free = nodes.usable.copy()  # moves in this pass take capacity from each other
    for t in np.argsort(-ev.gain_s, kind="stable"):  # the most worthwhile move first
        r = group[t]
        r.streak = int(ev.streak[t])
        c, b, kind = int(cur[t]), int(best_node[t]), x.kind[t]
        if not ev.move[t]:
            continue
        if not covers(free[b], x.need[t]):  # an earlier move of this pass took the room
            r.streak = int(sched.policy.patience(np.array([r.alpha]))[0]) - 1  # ready to move next pass
            continue
        free[b] -= x.need[t]
        free[c] += x.need[t]
        events.append(RescheduleEvent(
            task_id=r.task.id, from_nodes=list(r.nodes), to_nodes=[nodes.ids[b]], trigger=str(ev.trigger[t]),
            expected_gain_s=round(float(ev.gain_s[t]), 3), migration_cost_s=round(float(ev.cost_s[t]), 3),
            transfer_gb=round(r.state_gb + load_gb(r.task), 6),
            before=breakdown(x.compute[c, kind], network[t, c], current[t], r.alpha),
            after=breakdown(x.compute[b, kind], network[t, b], best[t], r.alpha),
            state_version=sched.version, at=now))
        start_at = moved(sched, r, [nodes.ids[b]], now, net, endpoint_rows(x, t), [b], not nodes.available[c], nodes)
        if start_at is not None:
            events[-1] = events[-1].model_copy(update={"start_at": start_at})
    return events


def _evaluate_group(sched, nodes: NodeView, group: list, x, net, eps: list[str], profile: str, cur, best_node,
                    current, best, now: float) -> Evaluation:
    alpha = np.array([r.alpha for r in group])
    # the worst of each task's own endpoint paths at its node, all tasks at once
    p95_now = worst_per_task(net.p95, x.ep_ptr, x.ep_idx, cur)
    loss_now, probes = worst_loss_per_task(net.loss, net.probes, x.ep_ptr, x.ep_idx, cur)
    base = np.array([r.baseline_p95 for r in group])
    loss_base = np.array([r.baseline_loss for r in group])
    shift = worst_per_task(net.shift, x.ep_ptr, x.ep_idx, cur) if sched.policy.detector else None
    deg = degraded(p95_now, base, loss_now, sched.policy, alpha, probes, loss_base, shift)
    forecast_only = np.zeros(len(group), bool)
    if sched.forecast_p95:
        p95_eff = sched.path_table(nodes, profile).gather("p95_eff", eps, len(nodes.ids))
        p95_fc = worst_per_task(p95_eff, x.ep_ptr, x.ep_idx, cur)
        forecast_only = degraded(p95_fc, base, loss_now, sched.policy, alpha, probes, loss_base) & ~deg
    fresh = _see_group(sched, group, x, net, cur)
    # the checkpoint moves from the task's node to the target (the target's NIC headroom counts); its
    # data is loaded again there over the target's own path from the data endpoint
    t_idx = np.arange(len(group))
    reload_gbps = np.where(x.data_ep >= 0, x.bandwidth_gbps[np.maximum(x.data_ep, 0), best_node], np.inf) \
        if x.bandwidth_gbps.size else np.full(len(group), np.inf)
    cost = migration_cost_s(np.array([r.state_gb for r in group]), net.between_nodes(cur, best_node),
                            nodes.queue_s[best_node], sched.policy, save_s=[r.save_s for r in group],
                            restore_s=[r.restore_s for r in group], reload_gb=x.data_gb[t_idx].astype(np.float64),
                            reload_gbps=reload_gbps)
    remaining = remaining_s([r.task.expected_duration_s for r in group], [r.ran_for(now) for r in group], sched.policy)
    joined = nodes.joined_at[best_node] > np.array([r.placed_at for r in group])
    return evaluate(current, best, deg, joined, alpha, np.array([r.streak for r in group]), remaining, cost,
                    np.array([now < r.cooldown_until for r in group]), sched.policy, forecast=forecast_only,
                    fresh=fresh, node_failed=~nodes.available[cur],
                    drained=np.array([drain_due(r, nodes, now) for r in group], bool) if nodes.draining.any()
                    else np.zeros(len(group), bool))


def _quiet(sched, nodes: NodeView, group: list, cur: np.ndarray, best: np.ndarray, current: np.ndarray,
           now: float) -> bool:
    """Whether no task of the group can move now, whatever its paths say: none has a node better by
    the policy's minimum gain, none's node failed, none is due off a draining node (core.reschedule.
    evaluate would move none and reset every streak)."""
    if better(current, best, sched.policy).any() or not nodes.available[cur].all():
        return False
    return not (nodes.draining.any() and any(drain_due(r, nodes, now) for r in group))


def _stay(sched, nodes: NodeView, group: list, profile: str, x, net, eps: list[str], cur: np.ndarray,
          gap: np.ndarray, over: np.ndarray) -> None:
    """A quiet group (``gap``: each task's best other node less its own; ``over``: every node's score
    before the room's mask less its own): its windows seen, its streaks reset, and the evaluation kept
    with its largest gap and the largest over every other node whose capacity fits it (what room coming
    back anywhere could offer: steady.remember)."""
    _see_group(sched, group, x, net, cur)
    for r in group:
        r.streak = 0
    could = _by_capacity(nodes, np.asarray(x.need, np.float32)[:, None, :])
    could[np.arange(len(group)), cur] = False
    steady.remember(sched, nodes, group, profile, x, eps, cur, _largest(gap), _largest(np.where(could, over, -np.inf)))


def _by_capacity(nodes: NodeView, needs: np.ndarray) -> np.ndarray:
    """Where ``needs`` (float32[..., 3]) could ever fit: each node's capacity, a hair up (its float32
    room, plus a gang's own need given back, may round above it). What room coming back could offer
    is bounded over these."""
    return covers(np.asarray(nodes.capacity, np.float32) * np.float32(1 + 1e-5), needs)


def _largest(gaps: np.ndarray) -> float:
    """The largest finite gap (-inf: none)."""
    finite = np.isfinite(gaps)
    return float(gaps[finite].max()) if finite.any() else -np.inf


def _see_group(sched, group: list, x, net, cur: np.ndarray) -> np.ndarray:
    """steady.see of a group's scoring inputs ``x`` and network inputs ``net``."""
    return steady.see(sched, group, net.end, x.ep_ptr, x.ep_idx, cur)


def _saw(sched, r, newest: float) -> bool:
    """Whether a gang's paths brought news since its last evaluation (core.reschedule.news, its
    newest window ``newest``); it has now seen them."""
    fresh, seen = news(newest, r.seen_window_end, sched.forecast_version, r.seen_forecast_version)
    r.seen_window_end, r.seen_forecast_version = float(seen), sched.forecast_version
    return bool(fresh)


class GangScores:
    """Running gangs of one node view scored in one kernel call per network profile (the endpoints of
    them all gathered once), before feasibility: as if every node had room without end and the gangs
    needed nothing, since each gang may use its own room (its resources given back). A gang's row,
    masked by its room with the kernel's own float32 comparisons, is what scoring it alone gave, value
    for value (the kernel's composite and network part of a task do not depend on the other tasks or
    endpoints of a call, nor on room)."""

    def __init__(self, sched, runs: list, nodes: NodeView) -> None:
        self._args = (sched, runs, nodes)
        self._of: dict[str, tuple] | None = None

    @property
    def of(self) -> dict[str, tuple]:
        """task id -> (NetworkInputs, ScoringInputs, row, composite, network), scored on first use (a
        rescoring whose gangs are all quiet scores none: scheduling.steady)."""
        if self._of is None:
            self._of = self._scored(*self._args)
        return self._of

    @staticmethod
    def _scored(sched, runs: list, nodes: NodeView) -> dict[str, tuple]:
        of = {}
        for profile in sorted({r.profile for r in runs}):
            group = [r for r in runs if r.profile == profile]
            tasks = [r.task for r in group]
            eps = endpoints(tasks)
            net = sched.network(eps, nodes, profile)
            x = scoring_inputs(tasks, [r.alpha for r in group], nodes, eps, net, sched.types, scope=sched.compute_scope)
            room = np.full(np.shape(x.usable), np.inf, np.float32)
            composite, network = score_parts(evolved(x, usable=room, need=np.zeros_like(x.need)))
            for t, r in enumerate(group):
                of[r.task.id] = (net, x, t, composite[t], network[t])
        return of


def spans_dark_path(sched, r, nodes: NodeView, now: float) -> bool:
    """Whether a path between two of the task's nodes is dark (failures.health: every probe lost both
    ways while both nodes are fine): its members cannot reach each other, it moves at once."""
    return len(r.nodes) > 1 and any(a in r.nodes and b in r.nodes for a, b in sched.judged(nodes, now)[3])


def migrate_gang(sched, r, nodes: NodeView, now: float, scored: GangScores | None = None) -> RescheduleEvent | None:
    """A gang is worth what its placement is worth (core.placement.gang_value); the alternative is
    the gang placement made now with the gang's own resources given back. It moves (the members
    that change) under the same rules as a single task, against the slowest member's move.
    ``scored``: the view's gangs scored together (GangScores), if the caller has them."""
    cut = spans_dark_path(sched, r, nodes, now)
    if not cut and steady.gang_still_quiet(sched, nodes, r, _saw):  # quiet at its last evaluation, and still
        return None
    task, alpha, w = r.task, r.alpha, r.task.cost_sensitivity
    members = [nodes.index[n] for n in r.nodes]
    usable, drained = own_room(sched, r, nodes, members, now)
    net, x, t, composite, network = (scored or GangScores(sched, [r], nodes)).of[task.id]
    raw = np.where(covers(np.asarray(usable, np.float32), np.asarray(x.need[t], np.float32)), composite,
                   np.float32(-np.inf))
    scores = masked(sched.running, task, nodes, usable, blend(raw[None, :], [w], nodes.energy)[0])
    compute = nodes.compute[:, x.kind[t]].astype(np.float64)
    g = GangScorer(alpha, scores, compute, net, x.unknown_quality, nodes.energy, w)
    current = float(np.nan_to_num(g.value(members), neginf=0.0, posinf=0.0))  # 0: a member's node failed
    rows = endpoint_rows(x, t)
    fresh = _saw(sched, r, _gang_worst(net, "end", rows, members))
    if not cut and _no_search(sched, nodes, r, g, usable, (net, x, t, composite), current, drained):
        return None
    alt = place(scores.copy(), need(task), usable.copy(), gang=len(members), peer_scores=g.peers, value_of=g.value,
                leads=g.leads)
    if not alt.placed or set(alt.nodes) == set(members):
        r.streak = 0
        return None
    best = g.value(alt.nodes)
    leaving = [m for m in members if m not in alt.nodes]
    arriving = [m for m in alt.nodes if m not in members]
    p95_now, loss_now = gang_path_state(net.p95, net.loss, rows, members, net.from_node("loss", members[0]))
    deg = degraded(np.array([p95_now]), np.array([r.baseline_p95]), np.array([loss_now]), sched.policy,
                   np.array([alpha]), loss_baseline=np.array([r.baseline_loss]),
                   shift=np.array([_gang_worst(net, "shift", rows, members)]) if sched.policy.detector else None)
    reload_gbps = x.bandwidth_gbps[x.data_ep[t], arriving] if x.data_ep[t] >= 0 else np.full(len(arriving), np.inf)
    cost = migration_cost_s(np.full(len(leaving), r.state_gb), net.between_nodes(leaving, arriving),
                            nodes.queue_s[arriving], sched.policy, save_s=np.full(len(leaving), r.save_s),
                            restore_s=np.full(len(leaving), r.restore_s), reload_gb=np.full(len(leaving), x.data_gb[t]),
                            reload_gbps=reload_gbps)
    remaining = remaining_s([task.expected_duration_s], [r.ran_for(now)], sched.policy)
    joined = bool((nodes.joined_at[arriving] > r.placed_at).any())
    ev = evaluate(np.array([current]), np.array([best]), deg, np.array([joined]), np.array([alpha]),
                  np.array([r.streak]), remaining, np.array([float(cost.max())]),
                  np.array([now < r.cooldown_until]), sched.policy, fresh=np.array([fresh]),
                  node_failed=np.array([not nodes.available[members].all()]), path_failed=np.array([cut]), drained=np.array([drained]))
    r.streak = int(ev.streak[0])
    if not ev.move[0]:
        return None
    event = RescheduleEvent(
        task_id=task.id, from_nodes=list(r.nodes), to_nodes=[nodes.ids[m] for m in alt.nodes],
        trigger=str(ev.trigger[0]), expected_gain_s=round(float(ev.gain_s[0]), 3),
        migration_cost_s=round(float(ev.cost_s[0]), 3),
        transfer_gb=round(len(leaving) * (r.state_gb + load_gb(task)), 6),
        before=breakdown(compute[members].mean(), g.network(network[members[0]], members), current, alpha),
        after=breakdown(compute[alt.nodes].mean(), g.network(network[alt.nodes[0]], alt.nodes), best, alpha),
        state_version=sched.version, at=now)
    start_at = moved(sched, r, [nodes.ids[m] for m in alt.nodes], now, net, rows, alt.nodes,
                     not nodes.available[members].all(), nodes)
    return event if start_at is None else event.model_copy(update={"start_at": start_at})


def _no_search(sched, nodes: NodeView, r, g: GangScorer, usable: np.ndarray, scored: tuple, current: float,
               drained: bool) -> bool:
    """Whether no gang placement could be better than the current one (``current``) by the minimum gain
    (``g``: the gang's scorer, its scores masked by its room ``usable``; ``scored``: its NetworkInputs,
    ScoringInputs, row and composite before the room's mask): then the streak resets and the evaluation
    is kept (steady.remember_gang), what the search would conclude. A gang due off a draining node or
    on a failed one is searched."""
    members, needs = [nodes.index[n] for n in r.nodes], need(r.task)
    if drained or not nodes.available[members].all():
        return False
    gap = _headroom(g, g.scores, usable, needs, len(members), current)
    if _could_gain(gap, sched.policy.min_gain_points):
        return False
    r.streak = 0
    net, x, t, composite = scored
    # the bound were every node's room its capacity: what it may be worth once room comes back anywhere
    unmasked = blend(composite[None, :], [r.task.cost_sensitivity], nodes.energy)[0]
    gap_any = g.upper_bound(np.isfinite(unmasked) & _by_capacity(nodes, needs), len(members), unmasked) - current
    steady.remember_gang(sched, nodes, r, x, net.endpoints, t, members, gap, gap_any)
    return True


def _could_gain(headroom: float, min_gain: float) -> bool:
    """Whether a gang whose best placement could be worth at most ``headroom`` points more than its
    current one (:func:`_headroom`) could gain the policy's ``min_gain``. False: the search would find
    nothing better by the minimum (no move, the streak reset), so it is not run."""
    return headroom >= min_gain - 1e-6  # the slack: a bound summed in another order


def _headroom(g: GangScorer, scores: np.ndarray, usable: np.ndarray, needs: np.ndarray, k: int,
              current: float) -> float:
    """The most a gang placement over the nodes that fit a worker could be worth above ``current``
    (GangScorer.upper_bound)."""
    return g.upper_bound(np.isfinite(scores) & covers(usable, needs), k) - current


def own_room(sched, r, nodes: NodeView, members: list[int], now: float) -> tuple[np.ndarray, bool]:
    """(what a gang's alternative may use: its own allocation given back, the head's reservation closed
    but for its own nodes, draining nodes closed when its drain is due; whether it is)."""
    usable = nodes.usable.copy()
    if sched.reservation is not None:  # never onto the head of the queue's reservation (its own nodes stay)
        usable[sched.reserved_mask(nodes)] = 0.0
    usable[members] += need(r.task)
    drained = drain_due(r, nodes, now)
    if drained:  # its members on draining nodes must go: the alternative is elsewhere
        usable[nodes.draining] = 0.0
    return usable, drained


def _gang_worst(net, name: str, rows: np.ndarray, members: list[int]) -> float:
    """The largest known ``name`` (``end``, ``shift``...) of a gang's paths: its endpoints' at every
    member, and each member's path to the first."""
    at_members = getattr(net, name)[np.ix_(rows, members)]  # endpoint_worst at every member, in one read
    return worst_known(np.concatenate([at_members.ravel(), net.from_node(name, members[0])[members[1:]]]))
