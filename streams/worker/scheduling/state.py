"""The scheduler's state and decisions: adapters from the network view, the inventory and the tasks
to the arrays of core/scoring, core/placement and core/reschedule, and back to Decisions and
RescheduleEvents. Owned by the worker that holds the single-partition state topics."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from core.energy import blend, energy_scores
from core.placement import gang_value, place, queue_order, rank
from core.quality import DEFAULT_MODEL, combine, dimension_utilities
from core.reschedule import ReschedulePolicy, degraded, evaluate, migration_cost_s
from core.scoring import REASONS, ScoringInputs, filter_reasons, score_all
from core.sensitivity import DEFAULT_TYPES, task_alpha
from schemas.sched import Candidate, Decision, Fallback, RescheduleEvent, ScoreBreakdown, Task
from streams.adapters.inventory import (
    DEFAULT_BENCHMARK_WORK,
    DEFAULT_MODEL_CONVERSION,
    TASK_KINDS,
    scored,
)

KIND_INDEX = {k: i for i, k in enumerate(TASK_KINDS)}
_EMPTY = np.zeros(0, np.int64)
DEFAULT_LINK_GBPS = 10.0


@dataclass
class Running:
    task: Task
    nodes: list[str]
    alpha: float
    profile: str
    placed_at: float
    baseline_p95: float
    streak: int = 0
    cooldown_until: float = 0.0
    moves: int = 0


@dataclass
class Pending:
    task: Task
    submitted_at: float


@dataclass
class NodeView:
    ids: list[str]
    index: dict[str, int]
    compute: np.ndarray  # [N, 3] per task kind
    capacity: np.ndarray  # [N, 3]
    usable: np.ndarray  # [N, 3] after our allocations and the margin
    available: np.ndarray
    node_class: np.ndarray
    class_names: list[str]
    has_accel: np.ndarray
    link_gbps: np.ndarray
    queue_s: np.ndarray
    joined_at: np.ndarray
    energy: np.ndarray  # [N] energy score 0-100 (core.energy; 50 where unknown)


@dataclass
class Scheduler:
    net: object  # streams.worker.state_tables.NetState
    inv: object  # streams.worker.state_tables.Inventory
    margin: float = 0.15
    max_wait_s: float = 600.0
    node_timeout_s: float = 60.0
    policy: ReschedulePolicy = field(default_factory=ReschedulePolicy)
    conversion: dict = field(default_factory=lambda: DEFAULT_MODEL_CONVERSION)
    benchmark_work: dict = field(default_factory=lambda: DEFAULT_BENCHMARK_WORK)
    running: dict[str, Running] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)
    version: int = 0
    first_seen: dict[str, float] = field(default_factory=dict)
    allocation_version: int = 0
    types: dict = field(default_factory=lambda: dict(DEFAULT_TYPES))  # type defaults, learned alphas included
    forecast_p95: dict = field(default_factory=dict)  # (src, dst) -> forecast worst p95 rtt (preventive mode)
    forecast_version: int = 0
    energy_carbon_weight: float = 0.5
    _cache: dict = field(default_factory=dict)

    on_touch: object = None  # called after every change (the worker's rescoring loop waits on it)

    def touch(self) -> None:
        self.version += 1
        if self.on_touch is not None:
            self.on_touch()

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
        """The inventory as arrays (rebuilt when it changes, at most once a second for the
        timeouts), with usable resources after our allocations (recomputed every call)."""
        key = ("nodes", getattr(self.inv, "version", None), int(now))
        base = self._nodes(now) if key[1] is None else self._cached(key, lambda: self._nodes(now))
        allocated = np.zeros_like(base.capacity)
        for run in self.running.values():
            need = self._need(run.task)
            for node in run.nodes:
                i = base.index.get(node)
                if i is not None:
                    allocated[i] += need
        usable = np.minimum(base.usable, base.capacity - allocated) - self.margin * base.capacity
        return NodeView(**{**base.__dict__, "usable": usable})

    def _nodes(self, now: float) -> NodeView:
        items = scored(self.inv.records(), self.conversion, self.benchmark_work, now, self.node_timeout_s)
        ids = [i["node"] for i in items]
        n = len(ids)
        index = {x: i for i, x in enumerate(ids)}
        classes: dict[str, int] = {}
        compute = np.zeros((n, 3), np.float32)
        capacity = np.zeros((n, 3), np.float32)
        free = np.zeros((n, 3), np.float32)
        link = np.full(n, DEFAULT_LINK_GBPS, np.float32)
        queue = np.zeros(n)
        joined = np.zeros(n)
        node_class = np.zeros(n, np.int64)
        for i, item in enumerate(items):
            r = item["report"]
            compute[i] = [item["compute_score"][k] for k in TASK_KINDS]
            cards = r.get("cards") or 0
            capacity[i] = [cards, cards * (r.get("mem_gb") or 0), r.get("host_mem_gb") or 0]
            f = r.get("free") or {}
            free[i] = [capacity[i, 0] if f.get("cards") is None else f["cards"],
                       capacity[i, 1] if f.get("mem_gb") is None else f["mem_gb"],
                       capacity[i, 2] if f.get("host_mem_gb") is None else f["host_mem_gb"]]
            link[i] = r.get("inter_bw_measured_gbps") or r.get("inter_bw_gbps") or DEFAULT_LINK_GBPS
            queue[i] = r.get("queue_delay_s") or 0.0
            node_class[i] = classes.setdefault(item["class"], len(classes))
            joined[i] = self.first_seen.setdefault(ids[i], now)
        def figure(key):
            return np.array([np.nan if i["report"].get(key) is None else float(i["report"][key]) for i in items])

        energy = energy_scores(figure("energy_price_per_mwh"), figure("carbon_g_per_kwh"), figure("power_kw"),
                               self.energy_carbon_weight)
        return NodeView(ids, index, compute, capacity, free,  # usable: see nodes()
                        np.array([i["available"] for i in items], bool), node_class, list(classes),
                        capacity[:, 0] > 0, link, queue, joined, energy)

    @staticmethod
    def _need(task: Task) -> np.ndarray:
        r = task.resources
        return np.array([r.cards, r.accel_mem_gb, r.host_mem_gb], np.float32)

    def network(self, endpoints: list[str], nodes: NodeView, profile: str):
        """quality[E, N] (NaN unknown), bandwidth[E, N], node_quality[N], p95[E, N], loss[E, N].

        p95 is as measured; quality uses the worse of measured and forecast p95 when preventive
        rescheduling has forecasts (``forecast_p95``)."""
        pt = self._path_table(nodes, profile)
        quality = self._gather(pt, "q", endpoints, nodes, np.float32)
        for a, ep in enumerate(endpoints):
            if ep in nodes.index:  # a node is perfectly connected to itself
                quality[a, nodes.index[ep]] = 100.0
        p95 = self._gather(pt, "p95", endpoints, nodes)
        loss = self._gather(pt, "loss", endpoints, nodes)
        ep_link = np.array([nodes.link_gbps[nodes.index[ep]] if ep in nodes.index else DEFAULT_LINK_GBPS
                            for ep in endpoints], np.float32)
        bandwidth = (np.minimum(nodes.link_gbps[None, :], ep_link[:, None])
                     * np.maximum(pt["headroom"], 0.05)[None, :]).astype(np.float32)
        return quality, bandwidth, pt["node_q"], p95, loss

    @staticmethod
    def _gather(pt: dict, name: str, endpoints: list[str], nodes: NodeView, dtype=np.float64) -> np.ndarray:
        """[E, N] of one per-path column of the path table (NaN where no path is known)."""
        out = np.full((len(endpoints), len(nodes.ids)), np.nan, dtype)
        for a, ep in enumerate(endpoints):
            cols, rows = pt["by_ep"].get(ep, (_EMPTY, _EMPTY))
            out[a, cols] = pt[name][rows]
        return out

    def _path_table(self, nodes: NodeView, profile: str) -> dict:
        """Quality, p95 and loss of every known path for a profile, indexed by endpoint; built once
        per version of the network view (O(paths)), then each decision reads only its endpoints."""
        version = getattr(self.net, "version", None)
        key = (("paths", profile), (version, self.forecast_version), tuple(nodes.ids))
        if version is None:
            return self._build_path_table(nodes, profile)
        return self._cached(key, lambda: self._build_path_table(nodes, profile))

    def _build_path_table(self, nodes: NodeView, profile: str) -> dict:
        cols = self.net.columns()
        rows, x = cols.path_inputs()
        src, dst = cols.src[rows], cols.dst[rows]
        n = len(nodes.ids)
        p95, loss = x["p95_rtt_ms"], x["loss"]
        p95_eff = p95
        if self.forecast_p95 and rows.size:
            # preventive mode: a path forecast to be slower is scored as if it already were
            fc = np.array([self.forecast_p95.get((cols.names[a], cols.names[b]), np.nan)
                           for a, b in zip(src, dst, strict=True)])
            p95_eff = np.fmax(p95, fc)
        u = dimension_utilities(p95_eff, x["loss"], x["bw_util"], x["retrans"], x["jitter_ms"])
        q = combine(u, DEFAULT_MODEL.weights(profile)).astype(np.float32) if rows.size else np.zeros(0, np.float32)
        # each path serves the node at its source towards the endpoint at its destination, and the
        # reverse direction when that one is not measured itself
        pos = np.full(len(cols.names), -1, np.int64)
        for i, node in enumerate(nodes.ids):
            code = cols.codes.get(node)
            if code is not None:
                pos[code] = i
        k = len(cols.names)
        pairs = src * k + dst
        reverse_measured = np.isin(dst * k + src, pairs)
        idx = np.arange(rows.size)
        fwd = pos[src] >= 0
        rev = (pos[dst] >= 0) & ~reverse_measured
        ent_row = np.concatenate([idx[fwd], idx[rev]])
        ent_col = np.concatenate([pos[src][fwd], pos[dst][rev]])
        ent_ep = np.concatenate([dst[fwd], src[rev]])
        order = np.argsort(ent_ep, kind="stable")
        ent_row, ent_col, ent_ep = ent_row[order], ent_col[order], ent_ep[order]
        cuts = np.flatnonzero(np.r_[True, ent_ep[1:] != ent_ep[:-1]]) if ent_ep.size else np.zeros(0, np.int64)
        by_ep = {cols.names[int(ent_ep[a])]: (ent_col[a:b], ent_row[a:b])
                 for a, b in zip(cuts, np.r_[cuts[1:], ent_ep.size], strict=True)}
        known = ~np.isnan(q[ent_row])
        node_sum = np.bincount(ent_col[known], weights=q[ent_row][known], minlength=n)
        node_cnt = np.bincount(ent_col[known], minlength=n)
        util = np.array([cols.local_value(node, "bw_util") for node in nodes.ids])
        return {
            "q": q, "p95": p95, "p95_eff": p95_eff, "loss": loss, "by_ep": by_ep,
            "node_q": np.where(node_cnt > 0, node_sum / np.maximum(node_cnt, 1), np.nan).astype(np.float32),
            "headroom": np.where(np.isnan(util), 1.0, 1.0 - util),
        }

    # --------------------------------------------------------------------------- decide
    def _inputs(self, tasks: list[Task], alphas: list[float], nodes: NodeView, endpoints: list[str],
                quality, bandwidth, node_q, zero_need: bool = False) -> ScoringInputs:
        eindex = {x: i for i, x in enumerate(endpoints)}
        ep_lists, data_ep, data_gb, masks = [], [], [], []
        for t in tasks:
            eps = [e.node for e in (t.data_source, t.model_repo) if e is not None]
            ep_lists.append([eindex[x] for x in eps])
            big = max((e for e in (t.data_source, t.model_repo) if e is not None), key=lambda e: e.size_gb, default=None)
            data_ep.append(eindex[big.node] if big is not None else -1)
            data_gb.append(sum(e.size_gb for e in (t.data_source, t.model_repo) if e is not None))
            allowed = [nodes.class_names.index(c) for c in t.resources.accel_classes if c in nodes.class_names]
            masks.append(sum(1 << c for c in allowed) if t.resources.accel_classes else 0)
            if t.resources.accel_classes and not allowed:
                masks[-1] = 1 << 62  # no known class allowed: nothing fits
        ptr = np.concatenate([[0], np.cumsum([len(x) for x in ep_lists])]).astype(np.int64)
        need = np.array([np.zeros(3) if zero_need else self._need(t) for t in tasks], np.float32).reshape(-1, 3)
        return ScoringInputs(
            compute=nodes.compute, usable=nodes.usable, available=nodes.available, node_class=nodes.node_class,
            has_accel=nodes.has_accel, node_quality=node_q, quality=quality, bandwidth_gbps=bandwidth,
            kind=np.array([KIND_INDEX[self.types[t.type].kind] for t in tasks], np.int64),
            alpha=np.array(alphas, np.float32), need=need, class_mask=np.array(masks, np.int64),
            ep_ptr=ptr, ep_idx=np.array([i for x in ep_lists for i in x], np.int64),
            data_ep=np.array(data_ep, np.int64), data_gb=np.array(data_gb, np.float32),
            accel_penalty=np.array([20.0 if self.types[t.type].prefers_plain_nodes and t.resources.cards == 0
                                    else 0.0 for t in tasks], np.float32),
        )

    def _endpoints(self, nodes: NodeView, tasks: list[Task]) -> list[str]:
        extra = sorted({e.node for t in tasks for e in (t.data_source, t.model_repo) if e is not None} - set(nodes.ids))
        return list(nodes.ids) + extra

    def decide(self, task: Task, now: float | None = None, reserve=None) -> Decision:
        now = time.time() if now is None else now
        alpha = task_alpha(task.type, task.alpha, task.strategy, self.types)
        profile = task.network_profile or self.types[task.type].profile
        nodes = self.nodes(now)
        endpoints = self._endpoints(nodes, [task])
        quality, bandwidth, node_q, p95, _loss = self.network(endpoints, nodes, profile)
        x = self._inputs([task], [alpha], nodes, endpoints, quality, bandwidth, node_q)
        raw = score_all(x)[0] if nodes.ids else np.zeros(0, np.float32)
        w = task.cost_sensitivity
        row = blend(raw[None, :], [w], nodes.energy)[0] if w > 0 and nodes.ids else raw
        compute_row = nodes.compute[:, x.kind[0]] if nodes.ids else np.zeros(0)
        net_row = ((raw - alpha * compute_row) / (1 - alpha)) if alpha < 1 else np.full(raw.shape, np.nan)
        x1 = self._inputs([task], [1.0], nodes, endpoints, quality, bandwidth, node_q)
        compute_only = rank(score_all(x1)[0])[: task.peers] if nodes.ids else []
        co = int(compute_only[0]) if len(compute_only) else -1
        reasons = filter_reasons(x, 0) if nodes.ids else np.zeros(0, np.int8)
        need = self._need(task)
        usable = nodes.usable.copy()

        def peer_scores(first: int) -> np.ndarray:
            q = np.where(np.isnan(quality[first]), x.unknown_quality, quality[first])
            peer = alpha * compute_row + (1 - alpha) * q
            return blend(peer[None, :], [w], nodes.energy)[0] if w > 0 else peer

        p = place(row, need, usable, gang=task.peers, reserve=reserve, peer_scores=peer_scores)
        ranked = rank(row)[:10]
        cands = [Candidate(node=nodes.ids[i], compute_score=round(float(compute_row[i]), 4),
                           network_score=round(float(net_row[i]), 4) if alpha < 1 else 0.0,
                           alpha=alpha, composite=round(float(row[i]), 4),
                           energy_score=round(float(nodes.energy[i]), 4) if w > 0 else None) for i in ranked]
        rejected = {nodes.ids[i]: REASONS[r] for i, r in enumerate(reasons) if r != 0}
        counts: dict[str, int] = {}
        for r in rejected.values():
            counts[r] = counts.get(r, 0) + 1
        chosen = [nodes.ids[i] for i in p.nodes]
        if chosen:
            self.pending.pop(task.id, None)
            cols = [nodes.index[c] for c in chosen]
            # the task's own paths (its endpoints) at placement: what later p95s are compared with
            base = _worst([_task_max(p95, x, 0, c) for c in cols])
            self.running[task.id] = Running(task, chosen, alpha, profile, now, float(base))
            self.allocation_version += 1
            self.touch()
        else:
            self.pending.setdefault(task.id, Pending(task, task.submitted_at or now))
        return Decision(
            task_id=task.id, status="placed" if chosen else "unschedulable", nodes=chosen, alpha=alpha,
            network_profile=profile, candidates=cands, rejected=rejected, rejected_counts=counts,
            fallbacks=[Fallback(node=nodes.ids[n] if n >= 0 else "", reason=r) for n, r in p.fallbacks],
            compute_only_nodes=[nodes.ids[i] for i in compute_only], state_version=self.version,
            compute_only_composite=_finite(row[co]) if co >= 0 else None,
            compute_only_network_score=_finite(net_row[co]) if co >= 0 and alpha < 1 else None,
            decided_at=now, task_type=task.type, submitted_at=task.submitted_at, cards=task.resources.cards,
            peers=task.peers, cost_sensitivity=w,
        )

    def retry_pending(self, now: float | None = None) -> list[Decision]:
        """Queued tasks in service order (starving first); the ones placed now."""
        now = time.time() if now is None else now
        items = list(self.pending.values())
        if not items:
            return []
        order = queue_order(np.array([p.task.priority for p in items]),
                            np.array([now - p.submitted_at for p in items]), self.max_wait_s)
        out = []
        for i in order:
            d = self.decide(items[i].task, now)
            if d.status == "placed":
                out.append(d)
        return out

    # ------------------------------------------------------------------------ reschedule
    def reschedule(self, now: float | None = None) -> list[RescheduleEvent]:
        now = time.time() if now is None else now
        if not self.running:
            return []
        nodes = self.nodes(now)
        runs = [r for r in self.running.values() if len(r.nodes) == 1 and r.nodes[0] in nodes.index]
        gangs = [r for r in self.running.values() if len(r.nodes) > 1 and all(n in nodes.index for n in r.nodes)]
        events = [ev for r in gangs if (ev := self._reschedule_gang(r, nodes, now)) is not None]
        for profile in sorted({r.profile for r in runs}):
            group = [r for r in runs if r.profile == profile]
            tasks = [r.task for r in group]
            endpoints = self._endpoints(nodes, tasks)
            quality, bandwidth, node_q, p95, loss = self.network(endpoints, nodes, profile)
            alphas = [r.alpha for r in group]
            x = self._inputs(tasks, alphas, nodes, endpoints, quality, bandwidth, node_q)
            x_now = self._inputs(tasks, alphas, nodes, endpoints, quality, bandwidth, node_q, zero_need=True)
            w = np.array([r.task.cost_sensitivity for r in group])
            s_raw, s_now_raw = score_all(x), score_all(x_now)  # before energy (their network scores)
            s = blend(s_raw, w, nodes.energy)
            s_now = blend(s_now_raw, w, nodes.energy)
            cur = np.array([nodes.index[r.nodes[0]] for r in group])
            t_idx = np.arange(len(group))
            current = s_now[t_idx, cur].astype(np.float64)
            s[t_idx, cur] = -np.inf
            best_node = np.argmax(s, axis=1)
            best = s[t_idx, best_node].astype(np.float64)
            p95_now = np.array([_task_max(p95, x, t, cur[t]) for t in t_idx])
            loss_now = np.array([_task_max(loss, x, t, cur[t]) for t in t_idx])
            base = np.array([r.baseline_p95 for r in group])
            deg = degraded(p95_now, base, loss_now, self.policy)
            forecast_only = np.zeros(len(group), bool)
            if self.forecast_p95:
                p95_eff = self._gather(self._path_table(nodes, profile), "p95_eff", endpoints, nodes)
                p95_fc = np.array([_task_max(p95_eff, x, t, cur[t]) for t in t_idx])
                forecast_only = degraded(p95_fc, base, loss_now, self.policy) & ~deg
            path_bw = np.array([bandwidth[best_node[t], cur[t]] if best_node[t] < len(endpoints) else 0.0 for t in t_idx])
            cost = migration_cost_s(np.array([r.task.checkpoint_gb for r in group]), path_bw,
                                    nodes.queue_s[best_node], self.policy)
            remaining = np.array([max(r.task.expected_duration_s - (now - r.placed_at), 0.0) for r in group])
            joined = nodes.joined_at[best_node] > np.array([r.placed_at for r in group])
            ev = evaluate(current, best, deg, joined, np.array(alphas), np.array([r.streak for r in group]),
                          remaining, cost, np.array([now < r.cooldown_until for r in group]), self.policy,
                          forecast=forecast_only)
            for t, r in enumerate(group):
                r.streak = int(ev.streak[t])
                if not ev.move[t]:
                    continue
                target = nodes.ids[int(best_node[t])]
                before = ScoreBreakdown(compute_score=float(x.compute[cur[t], x.kind[t]]),
                                        network_score=_net(float(s_now_raw[t, cur[t]]), x, t, cur[t]),
                                        composite=float(current[t]))
                after = ScoreBreakdown(compute_score=float(x.compute[best_node[t], x.kind[t]]),
                                       network_score=_net(float(s_raw[t, best_node[t]]), x, t, best_node[t]),
                                       composite=float(best[t]))
                events.append(RescheduleEvent(
                    task_id=r.task.id, from_nodes=list(r.nodes), to_nodes=[target], trigger=str(ev.trigger[t]),
                    expected_gain_s=round(float(ev.gain_s[t]), 3), migration_cost_s=round(float(ev.cost_s[t]), 3),
                    before=before, after=after, state_version=self.version, at=now))
                r.nodes = [target]
                r.placed_at = now
                r.cooldown_until = now + self.policy.cooldown_s
                r.moves += 1
                bt = int(best_node[t])
                r.baseline_p95 = _task_max(p95, x, t, bt)
        if events:
            self.allocation_version += 1
            self.touch()
        return events

    def _reschedule_gang(self, r: Running, nodes: NodeView, now: float) -> RescheduleEvent | None:
        """A gang is worth what its placement is worth (core.placement.gang_value); the alternative
        is the gang placement made now with the gang's own resources given back. It moves (the
        members that change) under the same rules as a single task: gain in points, patience,
        expected gain against the slowest member's migration cost, cool-down."""
        task, alpha, w = r.task, r.alpha, r.task.cost_sensitivity
        endpoints = self._endpoints(nodes, [task])
        quality, bandwidth, node_q, p95, loss = self.network(endpoints, nodes, r.profile)
        members = [nodes.index[n] for n in r.nodes]
        need = self._need(task)
        usable = nodes.usable.copy()
        usable[members] += need  # its own allocation is free for its own alternative
        x = dataclasses.replace(self._inputs([task], [alpha], nodes, endpoints, quality, bandwidth, node_q),
                                usable=usable)
        scores = blend(score_all(x)[0][None, :], [w], nodes.energy)[0]
        compute_row = nodes.compute[:, x.kind[0]].astype(np.float64)

        def peer(first: int) -> np.ndarray:
            q = np.where(np.isnan(quality[first]), x.unknown_quality, quality[first])
            ps = alpha * compute_row + (1 - alpha) * q
            return blend(ps[None, :], [w], nodes.energy)[0] if w > 0 else ps

        current = gang_value(scores, peer(members[0]), members)
        alt = place(scores.copy(), need, usable.copy(), gang=len(members), peer_scores=peer)
        if not alt.placed or set(alt.nodes) == set(members):
            r.streak = 0
            return None
        best = gang_value(scores, peer(alt.nodes[0]), alt.nodes)
        leaving = [m for m in members if m not in alt.nodes]
        arriving = [m for m in alt.nodes if m not in members]
        # degraded: the task's endpoint paths against their baseline, or loss on any of its paths
        # (endpoints and members to their first)
        p95_now = _worst([_task_max(p95, x, 0, m) for m in members])
        loss_paths = [_task_max(loss, x, 0, m) for m in members] + [loss[members[0], m] for m in members[1:]]
        loss_now = _worst(loss_paths)
        deg = degraded(np.array([p95_now]), np.array([r.baseline_p95]), np.array([loss_now]), self.policy)
        cost = migration_cost_s(np.full(len(leaving), task.checkpoint_gb),
                                np.array([bandwidth[a, b] for a, b in zip(leaving, arriving, strict=True)]),
                                nodes.queue_s[arriving], self.policy)
        remaining = max(task.expected_duration_s - (now - r.placed_at), 0.0)
        joined = bool((nodes.joined_at[arriving] > r.placed_at).any())
        ev = evaluate(np.array([current]), np.array([best]), deg, np.array([joined]), np.array([alpha]),
                      np.array([r.streak]), np.array([remaining]), np.array([float(cost.max())]),
                      np.array([now < r.cooldown_until]), self.policy)
        r.streak = int(ev.streak[0])
        if not ev.move[0]:
            return None

        def breakdown(value: float, ms: list[int]) -> ScoreBreakdown:
            c = float(compute_row[ms].mean())
            net = 0.0 if alpha >= 1 else round((value - alpha * c) / (1 - alpha), 4)
            return ScoreBreakdown(compute_score=round(c, 4), network_score=net, composite=round(value, 4))

        event = RescheduleEvent(
            task_id=task.id, from_nodes=list(r.nodes), to_nodes=[nodes.ids[m] for m in alt.nodes],
            trigger=str(ev.trigger[0]), expected_gain_s=round(float(ev.gain_s[0]), 3),
            migration_cost_s=round(float(ev.cost_s[0]), 3), before=breakdown(current, members),
            after=breakdown(best, alt.nodes), state_version=self.version, at=now)
        r.nodes = [nodes.ids[m] for m in alt.nodes]
        r.placed_at = now
        r.cooldown_until = now + self.policy.cooldown_s
        r.moves += 1
        r.baseline_p95 = _worst([_task_max(p95, x, 0, m) for m in alt.nodes])
        return event


def _worst(values) -> float:
    """The largest of the known values (NaN when none is known)."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.nanmax(v)) if (~np.isnan(v)).any() else math.nan


def _finite(v) -> float | None:
    v = float(v)
    return round(v, 4) if math.isfinite(v) else None


def _task_max(arr: np.ndarray, x: ScoringInputs, t: int, node: int) -> float:
    """The worst known value of the task's endpoint paths at ``node``."""
    return _worst(arr[x.ep_idx[x.ep_ptr[t]:x.ep_ptr[t + 1]], node])


def _net(composite: float, x: ScoringInputs, t: int, node: int) -> float:
    a = float(x.alpha[t])
    if a >= 1:
        return 0.0
    return round((composite - a * float(x.compute[node, x.kind[t]])) / (1 - a), 4)
