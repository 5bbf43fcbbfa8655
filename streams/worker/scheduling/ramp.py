"""Power-aware starts in the scheduler: each site's booked starts (time, MW) and its ramp limit
(CNSCHED_SITE_RAMP_LIMITS, MW per minute); a placed task's start is put off until every site it
draws from stays within its limit (core.ramp). The decision carries the time as ``start_at``.

Checkpoint bursts: a checkpoint idles a task's cards while it writes, and their draw comes back all
at once. Placed tasks are given a checkpoint phase, one of ``CHECKPOINT_SLOTS`` offsets within the
checkpoint interval, the one where their sites have the least MW checkpointing already, so a site's
checkpoints are spread over the interval rather than bunched (the decision's ``checkpoint_phase_s``).

A task's draw at a node is the node's full-load ``power_kw`` x the share of its cards the task takes
(all of it for a node without cards); a site is a node's zone (its region when it gives none).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from core.ramp import earliest_start

WINDOW_S = 60.0
CHECKPOINT_SLOTS = 12


@dataclass
class RampBook:
    limits: dict[str, float] = field(default_factory=dict)  # site -> MW per minute; "*": any other site
    starts: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    checkpoint_every_s: float = 1800.0
    slots: dict[str, np.ndarray] = field(default_factory=dict)  # site -> MW checkpointing in each slot
    phases: dict[str, tuple[int, dict[str, float]]] = field(default_factory=dict)  # task -> (slot, its draw)

    def limit(self, site: str) -> float:
        return self.limits.get(site, self.limits.get("*", np.inf))

    def book(self, draw: dict[str, float], now: float) -> float:
        """The start time of a task drawing ``draw`` (site -> MW) once placed at ``now``, booked."""
        if not self.limits or not draw:
            return now
        for site in draw:
            self.starts[site] = [(t, mw) for t, mw in self.starts[site] if t > now - WINDOW_S]
        at = now
        for _ in range(64):  # a start several sites accept: each pushes it on until all agree
            later = max(self._earliest(site, mw, at) for site, mw in draw.items())
            if later <= at:
                break
            at = later
        for site, mw in draw.items():
            self.starts[site].append((at, mw))
        return at

    def phase(self, task_id: str, draw: dict[str, float]) -> float | None:
        """The task's checkpoint offset within the interval (seconds), booked in the slot where its
        sites have the least MW checkpointing (ties: the earliest); None without limits or draw. A task
        phased before keeps its slot, its draw moved to its new sites (a move)."""
        if not self.limits or not draw:
            return None
        slot = self.phases[task_id][0] if task_id in self.phases else None
        self.release(task_id)
        if slot is None:
            load = sum((self.slots.get(site, np.zeros(CHECKPOINT_SLOTS)) for site in draw), np.zeros(CHECKPOINT_SLOTS))
            slot = int(np.argmin(load))
        for site, mw in draw.items():
            self.slots.setdefault(site, np.zeros(CHECKPOINT_SLOTS))[slot] += mw
        self.phases[task_id] = (slot, dict(draw))
        return slot * self.checkpoint_every_s / CHECKPOINT_SLOTS

    def release(self, task_id: str) -> None:
        """The task stopped drawing: its checkpoints leave their slot."""
        slot, draw = self.phases.pop(task_id, (None, {}))
        for site, mw in draw.items():
            self.slots[site][slot] = max(self.slots[site][slot] - mw, 0.0)

    def _earliest(self, site: str, mw: float, at: float) -> float:
        booked = self.starts[site]
        t = np.array([b[0] for b in booked], float)
        m = np.array([b[1] for b in booked], float)
        return earliest_start(at, mw, t, m, self.limit(site), WINDOW_S)


def draw_of(nodes, members: list[int], cards: float) -> dict[str, float]:
    """site -> MW a task taking ``cards`` on each of ``members`` adds there (NodeView ``nodes``)."""
    out: dict[str, float] = defaultdict(float)
    for i in members:
        kw = nodes.power_kw[i]
        if not np.isfinite(kw) or kw <= 0:
            continue
        total = nodes.capacity[i, 0]
        share = min(cards / total, 1.0) if total > 0 else 1.0
        out[nodes.sites[i]] += kw * share / 1000.0
    return dict(out)


def power_timing(sched, run, nodes, members: list[int], now: float) -> dict:
    """With site ramp limits (``sched.ramps``): the placed task's start time and checkpoint phase
    (decision fields; ``run.start_at`` set)."""
    if not sched.ramps.limits:
        return {}
    draw = draw_of(nodes, members, run.task.resources.cards)
    run.start_at = sched.ramps.book(draw, now)
    phase = sched.ramps.phase(run.task.id, draw)
    timing = {"start_at": round(run.start_at, 3)} if run.start_at > now else {}
    return timing | ({"checkpoint_phase_s": phase} if phase is not None else {})
