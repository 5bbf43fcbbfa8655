"""Placement in seconds (core.ect, issue 52): among the nodes a task's filters allow, the placement of
least cost — expected wait + load + run, plus the queue's price on the card-seconds it holds.

- one worker: every node's cost (its load from the data's endpoint over the measured path, its run on
  that node's cards); among the nodes within core.ect.EQUAL_SHARE of the least, the fullest (best fit),
  then the rack with the fewest fitting nodes (core.ect.single_order);
- a gang: candidate sets that start now — each rack that holds it, each site (fewest racks first), the
  whole pool (fewest sites, then racks) — and sets that start later, when each rack's or site's nodes
  free by the running tasks' expected ends (Slurm's ``--switches=N@max-time``, made quantitative). Each
  is costed with its members' worst measured pair RTT and narrowest pair bandwidth (core.ect.run_seconds);
  the least wins, now on a tie. When a later set wins the gang waits (the reason says for what).
The composite score stays for display and the audit trail only.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from core.ect import (
    EQUAL_SHARE,
    ONE_RACK,
    TRAINING_COMM_SHARE,
    sets_costs,
    sets_run_seconds,
    single_best,
    single_costs,
    single_order,
    sooner_loads,
)
from core.feasibility import covers
from core.groups import distinct_per_row
from core.placement import Placement, place, ranked
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoints_of, load_source, need
from streams.worker.scheduling.bandwidth import Booked, left_from
from streams.worker.scheduling.gang_sets import later_sets, named, near_sets, now_sets, sets_paths
from streams.worker.scheduling.gangs import FAR
from streams.worker.scheduling.queue import free_times, price_of
from streams.worker.scheduling.speeds import speeds_for
from streams.worker.scheduling.staging import load_name, site_of

SHORTLIST = 32  # candidate sets of a gang whose measured paths are read (Costing._shortlist)


def comm_share(task: Task, types) -> float:
    """The share of a task's time in one rack spent exchanging with its workers: training's measured
    prior (core.ect.TRAINING_COMM_SHARE) for a training task on several nodes, else 0."""
    return TRAINING_COMM_SHARE if task.peers > 1 and types[task.type].kind == "training" else 0.0


def decided_in_seconds(task: Task, types) -> bool:
    """Whether a task's placement is decided by its completion time (the time model covers it):
    training (inference is worth its answers' latency; data-intensive and generic work stream their
    data all along), not frugal (kept off strong cards by economy), without an energy preference (the
    composite weighs price and carbon), and every endpoint it names a load of known size (an endpoint
    without one is a path it uses all along). The others are placed by the composite (the points rule)."""
    d = types[task.type]
    return d.kind == "training" and not d.frugal and not task.cost_sensitivity and \
        all(e.size_gb for e in endpoints_of(task))


class Costing:
    """What one task's placements cost on a node view: the per-node parts and the queue's price."""

    def __init__(self, sched, task: Task, net, nodes: NodeView, now: float) -> None:
        self.task, self.net, self.nodes, self.now = task, net, nodes, now
        self.speed = speeds_for(sched, task, nodes)
        self.need = need(task)
        self.cards = float(self.need[0]) * task.peers
        self.comm = sched.comm_of.get(task.id, comm_share(task, sched.types))
        self.price = price_of(sched, task, nodes)
        # what earlier placements booked on paths the probes have not seen them on (bandwidth.py)
        self.booked = sched.path_book.unseen(net.table, now) if net.table is not None and sched.sees_network else {}
        if self.booked and task.id in sched.running:  # a move: its own traffic is not in its way
            self.booked = sched.path_book.others(task.id, self.booked)
        self.sched = sched
        self.load_gbps = np.zeros(len(nodes.ids))
        self.sources, self.load_src = [], np.zeros(len(nodes.ids), np.int64)  # where each node loads from
        self.load = self._load()
        self.strands = np.zeros(len(nodes.ids))  # set by single and gang, on what is free then
        self._measured: list[tuple] = []  # (sorted members, worst, narrow) of sets measured whole (_paths)
        self._one: dict[bytes, tuple] = {}  # a set's paths costed alone (_paths_of)

    def _stranding(self, usable: np.ndarray) -> np.ndarray:
        """float64[N]: the queued workers each node could hold now and could not once this task's worker
        takes its room, each shape's workers shared over the nodes that could hold one now (FGD's idea,
        Weng et al., USENIX ATC 2023, against the queue's own demand): times the task's run there, the
        seconds the queue may wait for that node to free."""
        book = self.sched.pending
        rows = book.ready()
        rows = rows[rows != book._row.get(self.task.id, -1)]
        out = np.zeros(len(self.nodes.ids))
        if not rows.size:
            return out
        counts = np.bincount(book.code[rows], minlength=len(book.shape_peers)) * book.shape_peers
        after = usable - self.need
        for code in np.flatnonzero(counts).tolist():
            before = covers(usable, book.shape_need[code]) & self.nodes.available
            lost = before & ~covers(after, book.shape_need[code])
            if lost.any():
                out += lost * (counts[code] / before.sum())
        return out

    def _load(self) -> np.ndarray:
        """float64[N] seconds to load the task's data, model and image at each node, over the path from
        the biggest of them (as the scores count it; 0 when it loads nothing) — or from a site's store
        holding a copy of it (staging.py), after the copy's expected end, where that is sooner."""
        src, gb = load_source(self.task)
        n = len(self.nodes.ids)
        if src is None or gb <= 0 or src not in (self.net.endpoints or []) or not self.sched.sees_network:
            return np.zeros(n)  # the compute-only baseline: blind to where data is, as to every path
        copies = self.sched.copies
        self.sources = [(src, self.now)] + ([c for c in copies.holding(load_name(self.task)) if c[0] != src]
                                            if copies.on else [])
        best = np.full(n, np.inf)
        for k, (ep, ready) in enumerate(self.sources):
            sooner_loads(best, self.load_gbps, self.load_src, k, max(ready - self.now, 0.0), gb, self._left_from(ep))
        return best

    def _left_from(self, ep: str) -> np.ndarray:
        """float64[N] Gbit/s left from endpoint ``ep`` to each node with what is booked on the paths
        (bandwidth.py), kept while neither the network inputs nor the book change (a burst's tasks
        loading from one store read it once)."""
        bw = self.net.bandwidth_from(ep)
        if not self.booked:
            return bw.astype(np.float64)
        if not isinstance(self.booked, Booked):  # a move's copy of the book (others): its own, once
            return left_from(bw, self.booked, ep, self.net.table)
        # the path book's own sum (Booked) says what was booked from ``ep`` since: a gang's or another
        # store's booking leaves this one's paths as they were
        changes = self.booked.source_changes.get(ep, 0)
        memo = self.sched._cache.get(("left from", ep))
        if memo is not None and memo[0]() is self.net and memo[1] == changes and memo[2] is self.booked:
            return memo[3]
        out = left_from(bw, self.booked, ep, self.net.table)
        out.flags.writeable = False
        # the inputs by weak reference: kept, they would outlive the view they were gathered for
        self.sched._cache[("left from", ep)] = (weakref.ref(self.net), changes, self.booked, out)
        return out

    def of_sets(self, sets: np.ndarray, wait_s: np.ndarray, paths: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(cost, what it strands of the queue in seconds), float64[K] each, of the task on each set of
        members (``sets`` int64[K, g] node rows) starting ``wait_s`` (float64[K]) from now (the
        stranding is read on what is free now: it means something for sets that start now). ``paths``
        False: every set as if in one rack (a shortlist's first cut). Vectorised over the sets."""
        sets = np.asarray(sets, np.int64)
        worst, narrow = self._worst_narrow(sets, paths)
        return sets_costs(self.task.expected_duration_s, self.speed, self.load, self.strands, sets, self.comm, worst,
                          narrow, wait_s, self.cards, self.price)

    def runs(self, sets: np.ndarray, paths: bool = True) -> np.ndarray:
        """float64[K]: the task's expected run on each set of members (``sets`` int64[K, g] node rows),
        over their measured paths (``paths`` False: as if in one rack)."""
        sets = np.asarray(sets, np.int64)
        return sets_run_seconds(self.task.expected_duration_s, self.speed[sets].min(axis=1), self.comm, sets.shape[1],
                                *self._worst_narrow(sets, paths))

    def _worst_narrow(self, sets: np.ndarray, paths: bool) -> tuple:
        """(worst pair RTT, narrowest pair Gbit/s) of each set as measured (``paths`` False: one rack's)."""
        if not paths:
            return ONE_RACK.ideal_rtt_ms, ONE_RACK.ideal_gbps
        return self._paths(sets) if len(sets) != 1 else self._paths_of(sets[0])

    def floor(self, sets: np.ndarray, wait_s: np.ndarray) -> np.ndarray:
        """float64[K]: no set's cost (:meth:`of_sets`, without what it strands) is below this: its
        members' paths as if instant (no latency, no bandwidth bound: core.jobperf's time only grows
        with RTT and falls with bandwidth). A later set whose floor is above the best set now (beyond
        core.ect.EQUAL_SHARE) cannot win, so its paths are not read."""
        return sets_costs(self.task.expected_duration_s, self.speed, self.load, self.strands, sets, self.comm, 0.0,
                          np.inf, wait_s, self.cards, self.price)[0]

    def expected(self, members: np.ndarray) -> float:
        """The task's expected load + run on ``members`` (node rows), seconds."""
        return float(self.load[members].max() + self.runs(np.asarray(members, np.int64)[None, :])[0])

    def _shortlist(self, sets: np.ndarray, wait_s: np.ndarray, racks: np.ndarray) -> np.ndarray:
        """The rows of the :data:`SHORTLIST` sets worth measuring: all when they are that few, else the
        least by their cost as if each sat in one rack (cards, loads, waits: no paths), ties to the
        fewest racks, then the first. Paths are read for those only (a gang fits in hundreds of racks)."""
        if len(sets) <= SHORTLIST:
            return np.arange(len(sets))
        pre = self.of_sets(sets, wait_s, paths=False)[0]
        kth = np.partition(pre, SHORTLIST - 1)[SHORTLIST - 1]  # the order's first are at or below it (NaN last)
        rows = np.arange(len(sets)) if np.isnan(kth) else np.flatnonzero(pre <= kth)
        return rows[np.lexsort((rows, racks[rows], pre[rows]))][:SHORTLIST]

    def _paths_of(self, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_paths` of one set, once per Costing (a placed gang's expected run and its booking ask)."""
        key = np.sort(np.asarray(members, np.int64))  # a set's worst and narrowest pair: any order
        for rows, worst, narrow in self._measured:
            at = np.flatnonzero((rows == key).all(axis=1)) if rows.shape[1] == key.size else ()
            if len(at):
                return worst[at[0]:at[0] + 1], narrow[at[0]:at[0] + 1]
        hit = self._one.get(key.tobytes())
        if hit is None:
            hit = self._one[key.tobytes()] = self._paths(key[None, :])
        return hit

    def _paths(self, sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(worst pair RTT, narrowest pair Gbit/s) of each set of members as measured
        (gang_sets.sets_paths); the sets whose every pair is measured are kept for :meth:`_paths_of`
        (such a set gets the same alone: the chosen set's expected run and booking read it again)."""
        sets = np.asarray(sets, np.int64)
        worst, narrow, measured = sets_paths(self.net, sets, self.booked, self.sched.sees_network)
        if measured.any():
            self._measured.append((np.sort(sets[measured], axis=1), worst[measured], narrow[measured]))
        return worst, narrow

    def book(self, members) -> None:
        """Book what the task will send across paths placed on ``members`` (bandwidth.py): its load from
        the data's endpoint to each of its racks (once per rack, at the rate it was costed with), for
        the load; a gang across racks, its communication share of the narrowest bandwidth between every
        two of its racks, for its load and run."""
        t = self.net.table
        if t is None or not self.sched.sees_network:
            return
        members = np.asarray(members, np.int64)
        racks = [t.rack_of.get(self.nodes.ids[m], "") for m in members.tolist()]
        if self.sources:
            first = {ep: m for m, ep in zip(members.tolist(), racks, strict=True) if ep}
            for ep, m in first.items():
                if np.isfinite(self.load[m]):
                    self.sched.path_book.add(self.task.id, [(self.sources[self.load_src[m]][0], ep)],
                                             float(self.load_gbps[m]), self.now, self.now + self.load[m])
        distinct = sorted({ep for ep in racks if ep})
        if len(distinct) > 1 and self.comm > 0:
            narrow = float(self._paths_of(members)[1][0])
            until = self.now + self.expected(members)
            if np.isfinite(narrow):
                self.sched.path_book.add(self.task.id, [(x, y) for x in distinct for y in distinct if x != y],
                                         self.comm * narrow, self.now, until)

    def stage(self, members, ahead: bool = False) -> None:
        """Stage the task's named load at the store of the one site of ``members`` (node rows) unless
        a copy is there or coming, or no probe measures that store's paths to them (staging.py): from
        the source the slowest member's load was costed from, expected to take that load's time. ``ahead`` (the members it waits for): the copy is
        booked on the paths to their racks too (placed, the load's own booking covers it)."""
        copies, name = self.sched.copies, load_name(self.task)
        members = np.asarray(members, np.int64)
        if not (copies.on and name and self.sources) or not np.isfinite(self.load[members]).all():
            return
        slow = int(members[np.argmax(self.load[members])])
        src = self.sources[self.load_src[slow]][0]
        if self.load_src[slow] > 0 and not ahead:  # placed to read a copy at a store: its decision says which
            copies.reads(self.task.id, name, src)
        target = copies.store_of(site_of(self.nodes, members.tolist()))
        if target is None:
            return
        copies.used(name, src, self.now)
        if copies.has(name, target) or src == target or self.net.table is None or \
                not np.isfinite(self.net.table.gather("p95", [target], len(self.nodes.ids))[0][members]).all():
            return  # there already, or no probe measures the store's paths to them: a copy there is never read
        size = max((e.size_gb for e in endpoints_of(self.task) if e.name == name), default=0.0)
        took = float(self.load[slow]) - max(dict(self.sources)[src] - self.now, 0.0)
        copies.stage(self.task.id, name, src, target, size, took, self.now)
        t = self.net.table
        if ahead and t is not None and self.sched.sees_network:
            racks = sorted({t.rack_of.get(self.nodes.ids[m], "") for m in members.tolist()} - {""})
            self.sched.path_book.add(self.task.id, [(src, r) for r in racks], float(self.load_gbps[slow]),
                                     self.now, self.now + took)

    def single(self, ok: np.ndarray, usable: np.ndarray, reserve) -> Placement:
        work = self.task.expected_duration_s
        self.strands = self._stranding(usable)
        if reserve is None:  # every node of the order fits and takes it: the first is the placement
            first = single_best(self.load, work, self.speed, self.strands, ok, usable, self.need, self._codes("racks"),
                                self.cards, self.price)
            p = Placement(nodes=[first] if first >= 0 else [])
            if first >= 0:
                usable[first] -= self.need
        else:  # a node may refuse: down the order of cost where it fits now (and what it strands there)
            costs, stock = single_costs(self.load, work / self.speed, self.strands, ok, usable, self.need,
                                        self._codes("racks"), self.cards, self.price)
            left = usable[:, 0] - self.need[0]
            p = place(ranked(single_order(costs, left, stock), len(ok)), self.need, usable, reserve=reserve)
        if p.placed:
            p.expected_s = float(self.load[p.nodes[0]] + work / self.speed[p.nodes[0]])
            self.book(p.nodes)
            self.stage(p.nodes)
        return p

    def now_best(self, fits: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray | None, float]:
        """(members, cost without what they strand) of the gang's best set among the nodes that ``fits``
        now (``usable``: what is free): each rack, each site, across sites led from each site, nearest
        by RTT where nodes lack racks; shortlisted, then costed over measured paths. Among costs equal
        with what each strands of the queue: the fewest racks, then the fewest cards left, then the
        first. (None, inf): no set."""
        g = self.task.peers
        self.strands = self._stranding(usable)
        rack, site = self._codes("racks"), self._codes("sites")
        left = usable[:, 0] - self.need[0]
        p95 = None if not self.sched.sees_network else (lambda m: self.net.from_node("p95", m))
        found = [*now_sets(fits, g, rack, site, self.speed, left, p95),
                 *(near_sets(self.net, np.where(fits, 0.0, np.inf), g) if self._some_unracked() else ())]
        if not found:
            return None, math.inf
        sets = np.concatenate([np.atleast_2d(m) for m in found])
        racks = distinct_per_row(rack[sets])
        keep = self._shortlist(sets, np.zeros(len(sets)), racks)
        sets, racks = sets[keep], racks[keep]
        plain, strands = self.of_sets(sets, np.zeros(len(sets)))
        costs = plain + strands
        tier = costs <= costs.min() * (1 + EQUAL_SHARE) + 1e-9
        k = int(np.lexsort((np.arange(len(sets)), left[sets].sum(axis=1), racks, ~tier))[0])
        # against a later set without it: what a later set strands is not known now, and counting it
        # on one side only would hold gangs back for the queue behind them
        return sets[k], float(plain[k])

    def gang(self, sched, ok: np.ndarray, usable: np.ndarray, reserve) -> Placement:
        g = self.task.peers
        fits = ok & covers(usable, self.need)
        rack, site = self._codes("racks"), self._codes("sites")
        best, best_cost = self.now_best(fits, usable)
        later, later_cost, when = None, math.inf, math.inf
        # no set frees before the first running task ends: when even the fastest cards, loading nothing
        # and waiting till then, cannot beat the best set now, no later set is looked for
        if best is None or not self.later_floor(sched.running.first_end_after(self.now)) * (1 + EQUAL_SHARE) >= best_cost:
            later, later_cost, when = self._later(sched, usable, None if best is None else best_cost)
        if best is not None and best_cost <= later_cost * (1 + EQUAL_SHARE):
            if reserve is None and len(set(best.tolist())) == g and covers(usable[best], self.need).all():
                p = Placement(nodes=best.tolist())  # what place takes, in its order: every member fits
                usable[best] -= self.need
            else:  # a member may refuse
                p = place(ranked(best, len(ok)), self.need, usable, gang=g, reserve=reserve)
            if p.placed:
                p.expected_s = self.expected(np.asarray(p.nodes, np.int64))
                self.book(p.nodes)
                self.stage(p.nodes)
            return p
        if later is None:
            return Placement(fallbacks=[(-1, f"gang incomplete: {int(fits.sum())} of {g} workers placed")])
        # the set it waits for: the queue reserves it when the gang comes first (queue.QueueMixin)
        sched.waiting_for[self.task.id] = (when, [self.nodes.ids[i] for i in later.tolist()])
        self.stage(later, ahead=True)  # its data copied there while it waits
        where = named(later, self.nodes, rack, site)
        now_s = "no placement now" if best is None else f"{best_cost:.0f} s now"
        return Placement(fallbacks=[(-1, f"{FAR}: {where} frees in {when - self.now:.0f} s; expected "
                                         f"{later_cost:.0f} s to complete there against {now_s}")],
                         waits_for=later.tolist())

    def _later(self, sched, usable: np.ndarray, best_cost: float | None) -> tuple[np.ndarray | None, float, float]:
        """(members, cost, start) of the gang's best set that starts later (each rack's or site's nodes
        that free first, nearest by RTT where nodes lack racks); (None, inf, inf): none, or none worth
        costing against ``best_cost`` now (None: no set now) as its floor loses."""
        g, rack, site = self.task.peers, self._codes("racks"), self._codes("sites")
        free_at = free_times(sched, self.task, self.nodes, self.now, usable)
        starts, sets = later_sets(free_at, g, rack, site, self.now)
        near = near_sets(self.net, free_at - self.now, g) if self._some_unracked() else []
        if near:  # nearest by RTT where nodes lack racks
            near = np.stack(near)
            near_at = free_at[near].max(axis=1)
            starts, sets = np.r_[starts, near_at[near_at > self.now]], np.r_[sets, near[near_at > self.now]]
        if not len(sets) or not (best_cost is None or self.floor(sets, starts - self.now).min() * (1 + EQUAL_SHARE)
                                 < best_cost):
            return None, math.inf, math.inf
        waits = starts - self.now
        keep = self._shortlist(sets, waits, distinct_per_row(rack[sets]))
        costs = self.of_sets(sets[keep], waits[keep])[0]
        k = int(keep[int(np.argmin(costs))])
        return sets[k], float(costs.min()), float(starts[k])

    def later_floor(self, start: float) -> float:
        """No set starting at ``start`` or after has a :meth:`floor` below this: its ``g`` members on the
        fastest cards of the view, loading nothing, waiting from now till ``start`` (a floor grows with
        the wait and the load and falls with faster cards). NaN when no card's speed is known."""
        speed = self.speed[~np.isnan(self.speed)]
        if not speed.size or not math.isfinite(start):
            return math.inf if speed.size else math.nan
        fastest = np.array([speed.max()], np.float64)
        one = np.zeros((1, self.task.peers), np.int64)
        return float(sets_costs(self.task.expected_duration_s, fastest, np.zeros(1), np.zeros(1), one, self.comm, 0.0,
                                np.inf, start - self.now, self.cards, self.price)[0][0])

    def _some_unracked(self) -> bool:
        """Whether some node of the view reports no rack (then sets by measured closeness are tried:
        gang_sets.near_sets), once per list of names."""
        names = self.nodes.racks
        memo = self.sched._cache.get("some unracked")
        if memo is None or memo[0] is not names:
            memo = self.sched._cache["some unracked"] = (names, not all(names))
        return memo[1]

    def _codes(self, kind: str) -> np.ndarray:
        """int64[N] a code per distinct name of the view's ``racks`` or ``sites``, once per list of names."""
        names = getattr(self.nodes, kind)
        memo = self.sched._cache.get(("seconds codes", kind))
        if memo is not None and memo[0] is names:
            return memo[1]
        codes = np.unique(np.asarray(list(names), dtype=str), return_inverse=True)[1].astype(np.int64) \
            if len(names) else np.zeros(0, np.int64)
        self.sched._cache[("seconds codes", kind)] = (names, codes)
        return codes
