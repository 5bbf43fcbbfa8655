"""What one replay run keeps while it runs (:class:`Run`, per running job) and returns
(:class:`Outcome`); :class:`InvariantError` when an invariant breaks (streams/replay/engine.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streams.replay.world import T0


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
    hit: np.ndarray = None  # bool[J] a labelled change point came on a path it used while it ran (exposure.py)
    quota_violations: int = 0  # events after which a team held more than its maximum
    power: dict = field(default_factory=dict)  # the sites' power figures (streams/replay/power.py)
    power_mw: np.ndarray | None = None  # float64[S, minutes] each site's draw
    load_s: np.ndarray | None = None  # float64[J] seconds its data loads took beyond the ideal, summed


def check_invariants(r, kind: int, a: int, books_same: bool) -> None:
    """After event ``kind`` (``a``) of replay ``r`` (engine.Replay): no node holds more cards than it has,
    the Scheduler's ledger is never overbooked; quota violations are counted. ``books_same``: the event
    cannot have changed the Scheduler's books (an epoch of a policy that does not move)."""
    cap = r.cluster.spec.cards_per_node
    if (r.free < 0).any() or (r.free > cap).any():
        bad = int(np.flatnonzero((r.free < 0) | (r.free > cap))[0])
        raise InvariantError(f"node {r.cluster.node_ids[bad]} over-allocated after event {kind} ({a}) "
                             f"at t={r.now:.0f}: {cap - r.free[bad]} of {cap} cards")
    if r.sched is None or books_same:
        return
    books = (r.sched.ledger.changes, r.sched.inv.version)
    if books != r.checked or r.sched.quotas.active:
        r.checked = books  # the books as last found sound: unchanged, they need no new look
        nodes = r.sched.nodes(T0 + r.now)
        over = r.sched.ledger.overbooked(nodes.index, nodes.capacity)
        if over:
            raise InvariantError(f"the scheduler's ledger overbooks {over[0]} after event {kind} ({a})")
        if r.sched.quotas.active:
            _, m = r.sched.quotas.arrays(nodes.class_names)
            use = r.sched.quotas.use(list(r.sched.running.values()), nodes.index, nodes.node_class,
                                     len(nodes.class_names)).use
            r.out.quota_violations += int((use > m + 1e-9).any())
