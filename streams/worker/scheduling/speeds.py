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


class Speeds:
    def __init__(self) -> None:
        self.rates: dict[str, dict[str, deque]] = {}  # workload -> card model -> its last KEEP rates
        self.version = 0
        self._memo: dict[str, tuple] = {}  # workload -> (card models seen, metered, version, speeds)

    def measured(self, workload: str | None, card_models: list[str], rate: float | None) -> bool:
        """A run of ``workload`` on members of ``card_models`` reported ``rate`` (its runner's
        ``throughput``): kept when it names a workload, the members share one known card model and
        the rate is positive. Whether it was kept."""
        models = set(card_models)
        if not workload or rate is None or not np.isfinite(rate) or rate <= 0 or len(models) != 1 or "" in models:
            return False
        self.rates.setdefault(workload, {}).setdefault(models.pop(), deque(maxlen=KEEP)).append(float(rate))
        self.version += 1
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
        if memo is not None and memo[0] is models and memo[1] is nodes.speed and memo[2] == self.version:
            return memo[3]
        names = sorted(by_model)
        at = {m: k for k, m in enumerate(names)}
        code = np.array([at.get(m, -1) for m in models.tolist()], np.int64)
        out = workload_speeds(metered, code, np.array([np.median(by_model[m]) for m in names]))
        out.flags.writeable = False
        self._memo[workload] = (models, nodes.speed, self.version, out)
        return out


def speeds_for(sched, task, nodes: NodeView) -> np.ndarray:
    """float64[N]: ``task``'s speed on each node, as the scheduler knows it (its workload's measured
    speeds; the metering's without a record, as the topology baseline plans)."""
    return sched.speeds.of(task.workload, nodes) if sched.speeds is not None else nodes.speeds()
