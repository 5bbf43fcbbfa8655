"""The scheduler's books of held tasks: task id -> Pending (the queue) and task id -> Running, each a
dict in the order tasks joined it, with what the queue's retries and reservations read of every entry
kept beside it as arrays (one row per entry, rows in the dict's order).

A queue of thousands is retried after every change, and the head's reservation reads every running
task; reading those facts from thousands of objects each time was most of a retry. Rows are written
when an entry is set and dropped when it leaves. An entry changed in place tells the books holding it
(held._tells_books: setting its task, nodes, hold, time run or placement time), which read its row again:
a read touches no entry object."""

from __future__ import annotations

import math

import numpy as np

from streams.worker.scheduling.held import Pending, Running

_MISSING = object()


class RowBook(dict):
    """A dict with one row per entry in its order (``entries``: the object of each row; None once
    dropped). Subclasses read an entry into their arrays in :meth:`_fill`; ``ARRAYS`` names them
    (first axis: rows). Read the arrays, never write them."""

    ARRAYS: tuple[str, ...] = ()
    _BASE = ("entries", "_live")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        self._row: dict[str, int] = {}
        self._at: dict[int, int] = {}  # id() of an entry -> its row (entries are held: ids stay theirs)
        self._used = 0
        self.entries = np.empty(0, object)
        self._live = np.zeros(0, bool)
        self.update(*args, **kwargs)

    # ------------------------------------------------------------------ the dict
    def __setitem__(self, task_id: str, value) -> None:
        row = self._row.get(task_id)
        if row is None:  # a new entry: the next row (the dict puts it last too)
            if self._used == len(self.entries):
                self._grow()
            row = self._row[task_id] = self._used
            self._used += 1
        else:
            self._let_go(self.entries[row])
        super().__setitem__(task_id, value)
        self.entries[row], self._live[row] = value, True
        self._at[id(value)] = row
        value._books = (*value._books, self)
        self._fill(row, value)

    def __delitem__(self, task_id: str) -> None:
        super().__delitem__(task_id)
        row = self._row.pop(task_id)
        self._let_go(self.entries[row])
        self._live[row] = False
        self.entries[row] = None

    def _let_go(self, value) -> None:
        """``value`` leaves its row: it tells this book nothing more."""
        row = self._at.get(id(value))
        if row is not None and self.entries[row] is value:
            del self._at[id(value)]
        value._books = tuple(b for b in value._books if b is not self)

    def changed(self, value) -> None:
        """An entry changed in place (held._tells_books tells its books): its row is read again."""
        row = self._at.get(id(value))
        if row is not None and self.entries[row] is value:
            self._fill(row, value)

    def pop(self, task_id: str, default=_MISSING):
        if task_id in self:
            value = self[task_id]
            del self[task_id]
            return value
        if default is _MISSING:
            raise KeyError(task_id)
        return default

    def setdefault(self, task_id: str, value):
        if task_id not in self:
            self[task_id] = value
        return self[task_id]

    def update(self, *args, **kwargs) -> None:
        for task_id, value in dict(*args, **kwargs).items():
            self[task_id] = value

    def popitem(self):
        task_id = next(reversed(self))
        return task_id, self.pop(task_id)

    def clear(self) -> None:
        for task_id in list(self):
            del self[task_id]

    def __ior__(self, other):
        self.update(other)
        return self

    # ------------------------------------------------------------------ the rows
    def row_of(self, task_id: str) -> int:
        """The row of an entry (-1 when there is none); rows move only when the arrays are read."""
        return self._row.get(task_id, -1)

    def _rows(self) -> np.ndarray:
        """The live rows in the dict's order."""
        if self._used > 64 and self._used > 2 * len(self):
            self._compact()
        return np.flatnonzero(self._live[:self._used])

    def _fill(self, row: int, value) -> None:
        """Read ``value``'s facts into its row (a subclass's arrays)."""

    def _grow(self) -> None:
        size = max(64, 2 * len(self.entries))
        for name in self._BASE + self.ARRAYS:
            old = getattr(self, name)
            new = np.empty((size, *old.shape[1:]), old.dtype) if old.dtype == object else \
                np.zeros((size, *old.shape[1:]), old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        """Rows of dropped entries out, the others' order kept."""
        keep = np.flatnonzero(self._live[:self._used])
        for name in self._BASE + self.ARRAYS:
            a = getattr(self, name)
            a[:len(keep)] = a[keep]
            a[len(keep):] = None if a.dtype == object else 0
        self._used = len(keep)
        self._row = {task_id: k for k, task_id in enumerate(super().keys())}
        self._at = {id(v): k for k, v in enumerate(super().values())}


class PendingBook(RowBook):
    """The queue: task id -> Pending, with per row its priority, expected duration and deadline
    (``order``: held.Facts.order), when it was submitted and the code of its shape (an index of
    ``shape_need`` / ``shape_peers``), whether an operator holds it and the code of its kind (an
    index of ``kinds``: its own network profile and its type, what its profile is read from)."""

    ARRAYS = ("order", "submitted", "code", "held", "kind")

    def __init__(self, *args, **kwargs) -> None:
        self.order = np.zeros((0, 3))
        self.held = np.zeros(0, bool)
        self.kind = np.zeros(0, np.int64)
        self.kinds: list[tuple] = []  # (network_profile, type) of each kind code
        self._kind_codes: dict[tuple, int] = {}
        self.submitted = np.zeros(0)
        self.code = np.zeros(0, np.int64)
        self.shapes: dict[tuple, int] = {}  # (need per node, workers) -> code
        self.shape_need = np.zeros((0, 3), np.float32)
        self.shape_peers = np.zeros(0, np.int64)
        super().__init__(*args, **kwargs)

    def ready(self) -> np.ndarray:
        """int64[K]: the rows of the entries not held, in the queue's order, as they stand now."""
        rows = self._rows()
        return rows[~self.held[rows]]

    def _fill(self, row: int, p: Pending) -> None:
        f = p.facts()
        code = self.shapes.get(f.shape)
        if code is None:
            code = self.shapes[f.shape] = len(self.shapes)
            self.shape_need = np.vstack([self.shape_need, np.asarray(f.shape[0], np.float32)[None, :]])
            self.shape_peers = np.append(self.shape_peers, f.shape[1])
        self.order[row], self.submitted[row], self.code[row], self.held[row] = f.order, p.submitted_at, code, p.held
        kind = (f.task.network_profile, f.task.type)
        k = self._kind_codes.get(kind)
        if k is None:
            k = self._kind_codes[kind] = len(self.kinds)
            self.kinds.append(kind)
        self.kind[row] = k


class RunningBook(RowBook):
    """Running tasks: task id -> Running, with per row its expected duration, its need per node, the
    time it ran and since when, and its nodes' rows in a node view's index (-1 past its nodes or for a
    node not in the index)."""

    ARRAYS = ("expected", "need", "ran", "placed", "at", "_lists")

    def __init__(self, *args, **kwargs) -> None:
        self.expected = np.zeros(0)
        self.need = np.zeros((0, 3))
        self.ran = np.zeros(0)
        self.placed = np.zeros(0)
        self.at = np.full((0, 1), -1, np.int64)
        self._lists = np.empty(0, object)  # the node list each row's ``at`` was read from (None: read it)
        self._index: dict | None = None  # the index ``at`` is in
        super().__init__(*args, **kwargs)

    def _fill(self, row: int, r: Running) -> None:
        f = r.facts()
        self.expected[row], self.need[row], self.ran[row], self.placed[row] = f.order[1], f.need, r.ran_s, r.placed_at
        if self._lists[row] is not r.nodes:
            self._lists[row] = None  # its rows are read at the next placements()

    def first_end_after(self, now: float) -> float:
        """The first expected end after ``now`` among the running tasks (queue.expected_end's arithmetic,
        every row at once; inf: none ends after now): no node frees later than now before it."""
        rows = self._rows()
        ran = self.ran[rows] + np.maximum(now - self.placed[rows], 0.0)
        ends = now + np.maximum(self.expected[rows] - ran, 0.0)
        later = ends[ends > now]
        return float(later.min()) if later.size else math.inf

    def placements(self, index: dict[str, int]) -> tuple:
        """(node rows, rows per task, ran_s, placed_at, expected duration, need per row) of the running
        tasks with a node in ``index``, in the book's order (queue.reservation_for reads them)."""
        rows = self._rows()
        stale = rows if index is not self._index else rows[np.equal(self._lists[rows], None)]
        self._index = index
        for row in stale.tolist():  # placed, moved or rolled back since: its node rows again
            self._place(row, self.entries[row].nodes, index)
        at = self.at[rows]
        present = at >= 0
        per = present.sum(axis=1)
        here = per > 0
        return (at[present], per[here], self.ran[rows][here], self.placed[rows][here], self.expected[rows][here],
                np.repeat(self.need[rows][here], per[here], axis=0))

    def _place(self, row: int, nodes: list[str], index: dict[str, int]) -> None:
        if len(nodes) > self.at.shape[1]:
            wider = np.full((len(self.at), len(nodes)), -1, np.int64)
            wider[:, :self.at.shape[1]] = self.at
            self.at = wider
        got = [index[x] for x in nodes if x in index]
        self.at[row] = -1
        self.at[row, :len(got)] = got
        self._lists[row] = nodes
