"""The capacity ledger: the single truth of what the scheduler has allocated, per task and node.

A hold is one task's need (cards, accelerator memory GB, host memory GB) on one node, of a kind:
``placed`` (placed there; until a runner reports it started, the scheduler's ``Running.started`` is
off and a start timeout or refusal hands it on) or ``migrating`` (the target of a move; the source
stays held until the task started at the target). What the scheduler may still give
out on a node is its capacity minus every hold there; the headroom for what it cannot know (memory
in use that the books do not explain, which grows between reports) is applied to the node's reported
free memory only: never to cards, never to its own bookings (see :func:`usable`).

Invariant, at every step: the holds on a node never exceed its capacity in any resource
(:meth:`Ledger.overbooked` lists where they do; after a node shrinks, say).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PLACED, MIGRATING = "placed", "migrating"


@dataclass
class Hold:
    node: str
    need: np.ndarray  # float[3]
    kind: str
    at: float  # when it was booked


class Ledger:
    """Holds per task, and their sum per node kept in step with every change (so what is allocated
    is O(nodes) to read, not O(holds): decisions in a burst read it every time)."""

    def __init__(self) -> None:
        self._holds: dict[str, list[Hold]] = {}
        self._totals: dict[str, np.ndarray] = {}  # node -> sum of its holds
        self._view: tuple[dict, int, np.ndarray] | None = None  # (index, n, totals as rows of that index)
        self.changes = 0  # counts every change of the holds (what was checked once need not be again)

    def _count(self, holds: list[Hold], sign: float) -> None:
        self.changes += 1
        for h in holds:
            tot = self._totals.get(h.node)
            tot = self._totals.setdefault(h.node, np.zeros(3)) if tot is None else tot
            tot += sign * h.need
            if sign < 0 and not tot.any():
                del self._totals[h.node]
            if self._view is not None and (i := self._view[0].get(h.node)) is not None:
                self._view[2][i] += sign * h.need

    def book(self, task_id: str, nodes: list[str], need: np.ndarray, at: float, kind: str = PLACED) -> None:
        """Hold ``need`` on each of ``nodes`` for the task, besides what it already holds."""
        new = [Hold(n, np.asarray(need, np.float64).copy(), kind, at) for n in nodes]
        self._holds.setdefault(task_id, []).extend(new)
        self._count(new, 1.0)

    def release(self, task_id: str, nodes: list[str] | None = None) -> None:
        """Give back the task's holds on ``nodes`` (all of them when None)."""
        held = self._holds.pop(task_id, [])
        kept = [] if nodes is None else [h for h in held if h.node not in nodes]
        self._count([h for h in held if nodes is None or h.node in nodes], -1.0)
        if kept:
            self._holds[task_id] = kept

    def settle(self, task_id: str, nodes: list[str], at: float) -> None:
        """The task now runs on exactly ``nodes``: holds elsewhere are released, those there placed."""
        self.release(task_id, [h.node for h in self._holds.get(task_id, []) if h.node not in nodes])
        if task_id in self._holds:
            self._holds[task_id] = [Hold(h.node, h.need, PLACED, at) for h in self._holds[task_id]]

    def nodes_of(self, task_id: str) -> list[str]:
        return [h.node for h in self._holds.get(task_id, [])]

    def tasks(self) -> list[str]:
        return list(self._holds)

    def allocated(self, index: dict[str, int], n: int, since: np.ndarray | None = None) -> np.ndarray:
        """float[N, 3]: held per node (``index``: node -> row); only holds booked after ``since[row]``
        when given (what a node's report could not know yet)."""
        if since is None:
            if self._view is None or self._view[0] is not index or self._view[1] != n:
                rows = np.zeros((n, 3))
                for node, tot in self._totals.items():
                    if (i := index.get(node)) is not None:
                        rows[i] = tot
                self._view = (index, n, rows)
            return self._view[2].copy()
        out = np.zeros((n, 3))
        for held in self._holds.values():
            for h in held:
                i = index.get(h.node)
                if i is not None and (since is None or h.at > since[i]):
                    out[i] += h.need
        return out

    def overbooked(self, index: dict[str, int], capacity: np.ndarray) -> list[str]:
        """Nodes whose holds exceed their capacity in some resource (the invariant says: none)."""
        alloc = self.allocated(index, capacity.shape[0])
        bad = (alloc > capacity + 1e-6).any(axis=1)
        return [node for node, i in index.items() if bad[i]]


def usable(capacity: np.ndarray, allocated: np.ndarray, reported_free: np.ndarray, booked_since_report: np.ndarray,
           report_age_s: np.ndarray, margin: float, full_margin_after_s: float) -> np.ndarray:
    """float32[N, 3]: what the scheduler may still give out on each node (cards, accelerator memory
    GB, host memory GB).

    Its own bookings are known exactly: ``capacity - allocated``. A node that reports what is free
    (``reported_free``, NaN where it does not say) may be used by others too, so its report, less
    what we booked after it (``booked_since_report``), bounds it as well:

    - cards are whole and are taken whole: the report bounds them exactly, with no headroom (an
      empty 8-card node reporting 8 free offers 8, whatever the report's age);
    - memory (accelerator and host) is utilisation-like: use the books do not explain (the report
      shows less free than the books) can grow between reports, so there a headroom is kept that
      grows with the report's age (``margin`` x capacity once the report is ``full_margin_after_s``
      old, nothing for a report just in). Where the report and the books agree, none is kept.

    Cards are whole: a fraction of a card is no card."""
    exact = capacity - allocated
    if np.isnan(reported_free).all():  # no node says what is free (the replay's): the books alone
        exact[:, 0] = np.floor(exact[:, 0] + 1e-9)
        return exact.astype(np.float32)
    reported = reported_free - booked_since_report
    age_share = np.clip(np.asarray(report_age_s, np.float64) / max(full_margin_after_s, 1e-9), 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        foreign = reported < exact - 1e-6  # in use by something our books do not hold
    headroom = np.where(foreign, margin * age_share[:, None] * capacity, 0.0)
    headroom[:, 0] = 0.0  # cards: whole, reported exactly
    out = np.where(np.isnan(reported_free), exact, np.minimum(exact, reported - headroom))
    out[:, 0] = np.floor(out[:, 0] + 1e-9)
    return out.astype(np.float32)
