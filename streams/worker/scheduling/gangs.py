"""A gang's network seen through every co-worker pair (the seeds' rule: a data-parallel job is scored
by its quality to all co-workers): what each node is worth as the next worker once some are chosen,
and what a whole gang is worth. Rows of path quality are gathered once per member."""

from __future__ import annotations

import numpy as np

from core.feasibility import fitting
from core.gang import gang_leads, gang_worth
from core.placement import Placement, closest_quality, packed, pair_means, peer_scores, place
from streams.adapters.tasks import need


class GangScorer:
    """``scores``: the task's composite per node (the first worker's worth: its endpoints, load and
    compute); ``compute``: its compute part; ``net``: NetworkInputs of its profile."""

    def __init__(self, alpha: float, scores: np.ndarray, compute: np.ndarray, net, unknown_quality: float,
                 energy: np.ndarray | None, cost_sensitivity: float) -> None:
        self.alpha, self.scores, self.compute = alpha, scores, np.asarray(compute, np.float64)
        self.unknown, self.energy, self.w = unknown_quality, energy, cost_sensitivity
        self._net = net
        self._rows: dict[int, np.ndarray] = {}  # member -> its quality row as is (NaN: unknown)
        self._sums: dict[tuple[int, ...], np.ndarray] = {}
        self._args: tuple | None = None  # core.gang's arguments (_compiled)

    def row(self, m: int) -> np.ndarray:
        """float64[N] the quality from node m to every node (gathered once per member)."""
        r = self._rows.get(m)
        if r is None:
            r = self._rows[m] = self._net.from_node("q", m).astype(np.float64)
        return r

    def _filled(self, m: int) -> np.ndarray:
        """float64[N] :meth:`row` with unknown paths at the unknown quality (a row of what core.gang reads)."""
        return self._compiled()[1][m]

    def _sum(self, chosen: tuple[int, ...]) -> np.ndarray:
        """The filled rows of ``chosen`` summed, by prefix: a gang grown one worker at a time adds one row."""
        s = self._sums.get(chosen)
        if s is None:
            last = self._filled(chosen[-1])
            s = self._sums[chosen] = last if len(chosen) == 1 else self._sum(chosen[:-1]) + last
        return s

    def peers(self, chosen: tuple[int, ...]) -> np.ndarray:
        """float64[N]: each node's worth as the next worker: its mean quality to the chosen ones."""
        return peer_scores(self.alpha, self.compute, self._sum(chosen) / len(chosen), self.unknown, self.energy,
                           self.w)

    def pair_quality(self, members: list[int]) -> np.ndarray:
        """float64[k]: each member's mean quality to the other members."""
        q = np.stack([self.row(m)[members] for m in members])  # q[j, i]: from member j to member i
        return pair_means(q, self.unknown)

    def value(self, members: list[int], left: np.ndarray | None = None, band: float = 0.0) -> float:
        """The first member's composite and every other member's worth by its quality to all the
        others, averaged (core.placement.gang_value's composition over every pair; compiled:
        core.gang.gang_worth); with ``band`` > 0 less the packing term (:meth:`packed`)."""
        return self._worth(members, *self._left(left, band), band)

    def _worth(self, members: list[int], left: np.ndarray, most: float, band: float) -> float:
        if not members:
            return float("-inf")
        return float(gang_worth(np.asarray(members, np.int64), *self._compiled(), left, band, most))

    def leads(self, ranked: np.ndarray, fits: np.ndarray, k: int, gang: int, left: np.ndarray | None = None,
              band: float = 0.0) -> np.ndarray:
        """core.placement.place's look-ahead over this gang's peers and value (core.gang.gang_leads,
        what core.placement._leads gives over :meth:`peers` and :meth:`value`, or over their packed
        forms with ``band`` > 0)."""
        return self._leads(ranked, fits, k, gang, *self._left(left, band), band)

    def _leads(self, ranked, fits, k: int, gang: int, left: np.ndarray, most: float, band: float) -> np.ndarray:
        return gang_leads(np.asarray(ranked, np.float64), np.asarray(fits, bool), k, gang, *self._compiled(), left,
                          band, most)

    def _compiled(self) -> tuple:
        """(scores, filled qualities, compute, alpha, 1 - alpha, unknown, energy, its weight) as
        core.gang reads them (``1 - alpha`` in the alpha's own type, as peer_scores computes it)."""
        if self._args is None:
            n = len(self.compute)
            on = self.w > 0 and self.energy is not None
            self._args = (np.asarray(self.scores, np.float64), self._net.filled_quality(self.unknown), self.compute,
                          float(self.alpha), float(1 - self.alpha), float(self.unknown),
                          np.asarray(self.energy, np.float64) if on else np.zeros(n), float(self.w) if on else 0.0)
        return self._args

    @staticmethod
    def _left(left: np.ndarray | None, band: float) -> tuple[np.ndarray, float]:
        if band <= 0 or left is None:
            return np.zeros(0), 1.0
        left = np.asarray(left, np.float64)
        return left, max(float(np.max(left, initial=0.0)), 1.0)

    def upper_bound(self, fits: np.ndarray, k: int, scores: np.ndarray | None = None) -> float:
        """The most any gang of ``k`` over the nodes ``fits`` (bool[N]) could be worth by :meth:`value`:
        the best lead score (of ``scores``, if given: the same composite before the room's mask), and
        every other worker at its compute and the best quality it has from another node that fits (a
        worker's quality is its mean from the other members; -inf when fewer than ``k`` fit; inf with
        an energy preference, whose blend is not bounded here)."""
        rows = np.flatnonzero(fits)
        if rows.size < k:
            return float("-inf")
        if self.w > 0 and self.energy is not None:
            return float("inf")
        lead = float(np.max((self.scores if scores is None else scores)[rows]))
        if k < 2:
            return lead
        _, filled, compute, alpha, rest = self._compiled()[:5]
        near = filled[np.ix_(rows, rows)]  # from a fitting node (row) to another (column)
        np.fill_diagonal(near, -np.inf)  # a node is not its own co-worker
        worth = alpha * compute[rows] + rest * near.max(axis=0)
        return (lead + (k - 1) * float(np.max(worth))) / k

    def closeness(self, members: list[int], could_host: np.ndarray) -> tuple[float, float]:
        """(the gang's mean member-pair quality, the same for the lead's closest co-workers): the
        lead's ``len(members) - 1`` best paths to nodes that ``could_host`` a worker (bool[N], by
        capacity, whatever runs there now) — what the gang would get if the lead's neighbours were free
        (core.placement.closest_quality)."""
        got = float(self.pair_quality(members).mean())
        return got, closest_quality(self._filled(members[0]), could_host, members[0], len(members) - 1)

    def packed(self, left: np.ndarray, band: float) -> tuple:
        """(scores, peer scores, gang value, look-ahead) for core.placement.place, ranking best fit among equals:
        the lead and each next worker among the nodes within ``band`` points of the best go to the one
        with the fewest cards ``left`` (core.placement.packed), and a whole gang's worth loses up to
        ``band`` points for the cards it leaves free on its nodes (none when it fills them), so of two
        gangs within the band the fuller wins. Within a rack every path is the same but for the probes'
        noise: without this a gang's workers went to whichever node measured a hair better — empty
        nodes as often as half-full ones — and broke nodes a whole-node task needed."""
        left = np.asarray(left, np.float64)
        as_read = self._left(left, band)  # with the most cards left anywhere: once, not per gang valued

        def peers(chosen: tuple[int, ...]) -> np.ndarray:
            p = self.peers(chosen)
            p[list(chosen)] = -np.inf  # taken already (and each one's quality to itself is 100: not a band's top)
            return packed(p, left, band)

        def value(members: list[int]) -> float:
            return self._worth(members, *as_read, band)

        def leads(ranked: np.ndarray, fits: np.ndarray, k: int, gang: int) -> np.ndarray:
            return self._leads(ranked, fits, k, gang, *as_read, band)

        return packed(self.scores, left, band), peers, value, leads

    def network(self, first_network: float, members: list[int]) -> float:
        """The network part of the gang's value, composed as :meth:`value` composes it."""
        q = self.pair_quality(members)
        return float((first_network + q[1:].sum()) / len(members))


FAR = "waiting for a closer gang"


def too_far(sched, task, g: GangScorer, members: list[int], nodes, now: float) -> str | None:
    """Why a gang waits rather than take ``members`` (None: it takes them): their mean pair quality
    is below ``sched.gang_closeness`` x what the lead's closest nodes would give if they were free,
    and the task has waited less than ``sched.gang_patience`` x its expected duration. Slurm's
    ``--switches=N@max-time`` with the measured network in place of switch counts."""
    if sched.gang_closeness <= 0:
        return None
    p = sched.pending.get(task.id)
    waited = p.waited(now) if p is not None else now - (task.submitted_at or now)
    patience = sched.gang_patience * task.expected_duration_s
    if waited >= patience:
        return None
    host = fitting(nodes.capacity, need(task), nodes.available & ~nodes.closed)
    got, best = g.closeness(members, host)
    if not got < sched.gang_closeness * best:  # close enough, or nothing to compare with (NaN)
        return None
    return (f"{FAR}: its pair quality {got:.0f} < {sched.gang_closeness:g} x {best:.0f} "
            f"(its lead's closest nodes, busy now); waits up to {patience - waited:.0f} s more")


def by_points(sched, task, s, net, unknown_quality: float, nodes, usable: np.ndarray, reserve, now: float):
    """The points rule (before issue 52; CNSCHED_PLACEMENT_RULE=points, and every task the seconds rule
    does not decide): one worker by best fit among the nodes within ``sched.packing_band`` of the best
    score while other tasks wait (core.placement.packed); a gang by its members' quality to each other,
    best fit among equals (``gang_packing_band``; GangScorer.packed), and it may wait for a closer one
    (:func:`too_far`)."""
    n = need(task)
    if task.peers == 1:
        # packing pays only for work that waits: with an empty queue the best score decides alone
        others = len(sched.pending) - (task.id in sched.pending)
        band = sched.packing_band if others > 0 else 0.0
        return place(packed(s.composite, usable[:, 0] - n[0], band), n, usable, reserve=reserve)
    g = GangScorer(s.alpha, s.composite, s.compute, net, unknown_quality, nodes.energy, task.cost_sensitivity)
    scores, peers, value, leads = g.packed(usable[:, 0] - n[0], sched.gang_packing_band)
    p = place(scores, n, usable, gang=task.peers, reserve=reserve, peer_scores=peers, value_of=value, leads=leads)
    why = too_far(sched, task, g, p.nodes, nodes, now) if p.placed else None
    if why is None:
        return p
    usable[p.nodes] += n  # not taken: the gang waits (place's all-or-nothing undo)
    return Placement(fallbacks=[*p.fallbacks, (-1, why)])
