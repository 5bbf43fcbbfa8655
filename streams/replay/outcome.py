"""What one replay run keeps while it runs (:class:`Run`, per running job) and returns
(:class:`Outcome`); :class:`InvariantError` when an invariant breaks (streams/replay/engine.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class InvariantError(RuntimeError):
    """A replay invariant broke: the message names the event."""


@dataclass
class Run:
    members: list[int]
    work: float = 0.0  # ideal seconds done
    pause: float = 0.0  # restart / migration / data load still to sit out before working
    per_work: float = 1.0  # wall seconds per ideal second here
    last: float = 0.0
    token: int = 0


@dataclass
class Outcome:
    start: np.ndarray
    end: np.ndarray
    state: list[str]  # finished / failed / unschedulable
    reason: list[str]
    migrations: np.ndarray
    migration_s: np.ndarray
    restarts: np.ndarray
    card_seconds: float
    makespan: float
    events: dict = field(default_factory=dict)
    preemptions: np.ndarray = None  # int64[J] (ours-quotas)
    lost_card_s: float = 0.0  # work preempted jobs lost since their last checkpoint
    quota_violations: int = 0  # events after which a team held more than its maximum
    power: dict = field(default_factory=dict)  # the sites' power figures (streams/replay/power.py)
    power_mw: np.ndarray | None = None  # float64[S, minutes] each site's draw
