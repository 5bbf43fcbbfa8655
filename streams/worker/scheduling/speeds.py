"""What each workload's runners measured on each card model (core.speeds): a task that names its
``workload`` is costed with that workload's speeds, not the metering's, once its runs have measured
two card models.

A rate counts where every member of the run has the same card model (a gang on mixed cards runs at its
slowest member's pace, which says nothing of the others); the last :data:`KEEP` rates per workload and
card model are kept, their median read (one run on a noisy or shared node does not speak for the
model). In memory, as run-time history (durations.py): a restarted worker learns again."""

from __future__ import annotations

from collections import deque

import numpy as np

from core.speeds import workload_speeds
from streams.adapters.inventory import NodeView

KEEP = 5  # rates per workload and card model (chosen, not tuned: a median of five outvotes two bad runs)
WORKLOADS = 10_000  # workloads remembered, the least recently measured forgotten first (bounded memory)


class Speeds:
    def __init__(self) -> None:
        self.rates: dict[str, dict[str, deque]] = {}  # workload -> card model -> its last KEEP rates
        self.version = 0  # counts every kept rate
        self._stamp: dict[str, int] = {}  # workload -> the version its last kept rate made
        # workload -> (card models seen, metered, its stamp, speeds): a rate of one workload leaves
        # the others' speeds as they were (at the pool's bound, 10,000 memos are not all read again)
        self._memo: dict[str, tuple] = {}
        self._models: tuple | None = None  # (a view's card models, their distinct names, each node's code)

    def measured(self, workload: str | None, card_models: list[str], rate: float | None) -> bool:
        """A run of ``workload`` on members of ``card_models`` reported ``rate`` (its runner's
        ``throughput``): kept when it names a workload, the members share one known card model and
        the rate is positive. Whether it was kept."""
        models = set(card_models)
        if not workload or rate is None or not np.isfinite(rate) or rate <= 0 or len(models) != 1 or "" in models:
            return False
        mine = self.rates.pop(workload, {})  # re-inserted: the dict's order is the last measured
        mine.setdefault(models.pop(), deque(maxlen=KEEP)).append(float(rate))
        self.rates[workload] = mine
        while len(self.rates) > WORKLOADS:
            old = next(iter(self.rates))
            self._memo.pop(old, None), self._stamp.pop(old, None)
            del self.rates[old]
        self.version += 1
        self._stamp[workload] = self.version
        return True

    def of(self, workload: str | None, nodes: NodeView) -> np.ndarray:
        """float64[N]: the speed of ``workload``'s work on each node of ``nodes`` (the metering's where
        its runs measured fewer than two card models, or it names none). Read it, never write it."""
        metered = nodes.speeds()
        by_model = self.rates.get(workload or "")
        models = nodes.card_models
        if not by_model or len(by_model) < 2 or len(models) != len(metered):
            return metered
        memo = self._memo.get(workload)
        stamp = self._stamp[workload]
        if memo is not None and memo[0] is models and memo[1] is nodes.speed and memo[2] == stamp:
            return memo[3]
        names, code = self._codes(models)
        rate = np.array([np.median(by_model[m]) if m in by_model else np.nan for m in names])
        out = workload_speeds(metered, code, rate)
        out.flags.writeable = False
        self._memo[workload] = (models, nodes.speed, stamp, out)
        return out

    def _codes(self, models: np.ndarray) -> tuple[list[str], np.ndarray]:
        """(the distinct card models, int64[N] each node's), once per view's array of models."""
        if self._models is None or self._models[0] is not models:
            names, code = np.unique(models.astype(str), return_inverse=True)
            self._models = (models, names.tolist(), code.astype(np.int64))
        return self._models[1], self._models[2]


def speeds_for(sched, task, nodes: NodeView) -> np.ndarray:
    """float64[N]: ``task``'s speed on each node, as the scheduler knows it (its workload's measured
    speeds; the metering's without a record, as the topology baseline plans)."""
    return sched.speeds.of(task.workload, nodes) if sched.speeds is not None else nodes.speeds()
