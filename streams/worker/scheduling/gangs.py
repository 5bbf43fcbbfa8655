"""A gang's network seen through every co-worker pair (the seeds' rule: a data-parallel job is scored
by its quality to all co-workers): what each node is worth as the next worker once some are chosen,
and what a whole gang is worth. Rows of path quality are gathered once per member."""

from __future__ import annotations

import numpy as np

from core.feasibility import fitting
from core.placement import closest_quality, packed, pair_means, peer_scores
from streams.adapters.tasks import need


class GangScorer:
    """``scores``: the task's composite per node (the first worker's worth: its endpoints, load and
    compute); ``compute``: its compute part; ``net``: NetworkInputs of its profile."""

    def __init__(self, alpha: float, scores: np.ndarray, compute: np.ndarray, net, unknown_quality: float,
                 energy: np.ndarray | None, cost_sensitivity: float) -> None:
        self.alpha, self.scores, self.compute = alpha, scores, np.asarray(compute, np.float64)
        self.unknown, self.energy, self.w = unknown_quality, energy, cost_sensitivity
        self._net = net
        self._rows: dict[int, np.ndarray] = {}  # member -> its quality row, as is and NaN filled
        self._filled_rows: dict[int, np.ndarray] = {}
        self._sums: dict[tuple[int, ...], np.ndarray] = {}

    def row(self, m: int) -> np.ndarray:
        """float64[N] the quality from node m to every node (gathered once per member)."""
        r = self._rows.get(m)
        if r is None:
            r = self._rows[m] = self._net.from_node("q", m).astype(np.float64)
        return r

    def _filled(self, m: int) -> np.ndarray:
        r = self._filled_rows.get(m)
        if r is None:
            r = self._filled_rows[m] = np.where(np.isnan(self.row(m)), self.unknown, self.row(m))
        return r

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

    def value(self, members: list[int]) -> float:
        """The first member's composite and every other member's worth by its quality to all the
        others, averaged (core.placement.gang_value's composition over every pair)."""
        if not members:
            return float("-inf")
        q = self.pair_quality(members)
        energy = None if self.energy is None else self.energy[members]
        worth = peer_scores(self.alpha, self.compute[members], q, self.unknown, energy, self.w)
        return float((self.scores[members[0]] + worth[1:].sum()) / len(members))

    def upper_bound(self, fits: np.ndarray, k: int) -> float:
        """The most any gang of ``k`` over the nodes ``fits`` (bool[N]) could be worth by :meth:`value`:
        the best lead score and every other worker at its compute and the best quality (-inf when fewer
        than ``k`` fit; inf with an energy preference, whose blend is not bounded here)."""
        rows = np.flatnonzero(fits)
        if rows.size < k:
            return float("-inf")
        if self.w > 0 and self.energy is not None:
            return float("inf")
        worth = self.alpha * self.compute[rows] + (1.0 - self.alpha) * max(100.0, self.unknown)
        return (float(np.max(self.scores[rows])) + (k - 1) * float(np.max(worth))) / k

    def closeness(self, members: list[int], could_host: np.ndarray) -> tuple[float, float]:
        """(the gang's mean member-pair quality, the same for the lead's closest co-workers): the
        lead's ``len(members) - 1`` best paths to nodes that ``could_host`` a worker (bool[N], by
        capacity, whatever runs there now) — what the gang would get if the lead's neighbours were free
        (core.placement.closest_quality)."""
        got = float(self.pair_quality(members).mean())
        return got, closest_quality(self._filled(members[0]), could_host, members[0], len(members) - 1)

    def packed(self, left: np.ndarray, band: float) -> tuple:
        """(scores, peer scores, gang value) for core.placement.place, ranking best fit among equals:
        the lead and each next worker among the nodes within ``band`` points of the best go to the one
        with the fewest cards ``left`` (core.placement.packed), and a whole gang's worth loses up to
        ``band`` points for the cards it leaves free on its nodes (none when it fills them), so of two
        gangs within the band the fuller wins. Within a rack every path is the same but for the probes'
        noise: without this a gang's workers went to whichever node measured a hair better — empty
        nodes as often as half-full ones — and broke nodes a whole-node task needed."""
        left = np.asarray(left, np.float64)
        most = max(float(np.max(left, initial=0.0)), 1.0)

        def peers(chosen: tuple[int, ...]) -> np.ndarray:
            p = self.peers(chosen)
            p[list(chosen)] = -np.inf  # taken already (and each one's quality to itself is 100: not a band's top)
            return packed(p, left, band)

        def value(members: list[int]) -> float:
            return self.value(members) - band * float(np.clip(left[members], 0, None).mean()) / most

        return packed(self.scores, left, band), peers, value

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
