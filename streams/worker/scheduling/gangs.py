"""A gang's network seen through every co-worker pair (the seeds' rule: a data-parallel job is scored
by its quality to all co-workers): what each node is worth as the next worker once some are chosen,
and what a whole gang is worth. Rows of path quality are gathered once per member."""

from __future__ import annotations

import functools

import numpy as np

from core.placement import pair_means, peer_scores


class GangScorer:
    """``scores``: the task's composite per node (the first worker's worth: its endpoints, load and
    compute); ``compute``: its compute part; ``net``: NetworkInputs of its profile."""

    def __init__(self, alpha: float, scores: np.ndarray, compute: np.ndarray, net, unknown_quality: float,
                 energy: np.ndarray | None, cost_sensitivity: float) -> None:
        self.alpha, self.scores, self.compute = alpha, scores, np.asarray(compute, np.float64)
        self.unknown, self.energy, self.w = unknown_quality, energy, cost_sensitivity
        self.row = functools.cache(lambda m: net.from_node("q", m).astype(np.float64))  # quality from m to all
        self._filled = functools.cache(lambda m: np.where(np.isnan(r := self.row(m)), unknown_quality, r))
        self._sum = functools.cache(self._sum_of)  # by prefix: a gang grown one worker at a time adds one row

    def _sum_of(self, chosen: tuple[int, ...]) -> np.ndarray:
        last = self._filled(chosen[-1])
        return last if len(chosen) == 1 else self._sum(chosen[:-1]) + last

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

    def network(self, first_network: float, members: list[int]) -> float:
        """The network part of the gang's value, composed as :meth:`value` composes it."""
        q = self.pair_quality(members)
        return float((first_network + q[1:].sum()) / len(members))
