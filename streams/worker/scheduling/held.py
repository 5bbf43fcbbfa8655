"""What the scheduler holds per task: a running task (where, since when, its baseline and checkpoints)
and a queued one (since when, its restarts and the checkpoint it resumes from)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from core.ect import left_here
from schemas.sched import Task
from streams.adapters.tasks import need


class Facts(NamedTuple):
    """What the queue and the reservations read of a held task, built once per task object."""

    task: Task
    need: np.ndarray  # float32[3] read-only: streams.adapters.tasks.need
    shape: tuple  # (need per node, workers): tasks of one shape fit where each other fits
    order: tuple[float, float, float]  # (priority, expected duration, deadline — NaN without one)


def _tells_books(*names: str):
    """A class decorator (above ``@dataclass``): setting one of ``names`` on an entry tells the books
    holding it (books.RowBook.changed). Each is a property reading its value with a C-level getter,
    since they are read far more often than set; the other fields stay plain attributes (a rescoring
    sets a few on every running task at every window)."""

    def told(name: str) -> property:
        private = "_" + name

        def set_(self, value) -> None:
            object.__setattr__(self, private, value)
            for book in self._books:
                book.changed(self)

        return property(attrgetter(private), set_, doc=f"{name} (setting it tells the books holding the entry)")

    def decorate(cls):
        for name in names:
            setattr(cls, name, told(name))
        return cls

    return decorate


class _Needs:
    """What the held task takes on each node and the rest of its :class:`Facts`, built once per task
    object (queue retries and reservations ask about every held task at every change)."""

    _facts = None  # Facts of the task they were built for
    _books: tuple = ()  # the books it is an entry of (what the books keep of it is set by _tells_books)

    def need(self) -> np.ndarray:
        return self.facts().need

    def facts(self) -> Facts:
        """Its task's Facts (a new task object — a changed priority — is seen)."""
        f = self._facts
        if f is None or f.task is not self.task:
            t = self.task
            n = need(t)
            n.setflags(write=False)  # shared by every caller: read it, never write it
            deadline = math.nan if t.deferrable_until is None else float(t.deferrable_until)
            f = self._facts = Facts(t, n, (tuple(n.tolist()), t.peers),
                                    (float(t.priority), float(t.expected_duration_s), deadline))
        return f


@_tells_books("task", "nodes", "ran_s", "placed_at")
@dataclass
class Running(_Needs):
    task: Task
    nodes: list[str]
    alpha: float
    profile: str
    placed_at: float
    baseline_p95: float
    streak: int = 0
    cooldown_until: float = 0.0
    moves: int = 0
    baseline_loss: float = math.nan  # the loss of its worst path at placement
    seen_window_end: float = -math.inf  # the newest window of its paths it was evaluated on
    seen_forecast_version: int = 0  # the forecasts it was evaluated on (preventive mode)
    checkpoint_at: float = math.nan  # its last checkpoint (NaN: none yet)
    checkpoint_gb: float = math.nan  # that checkpoint's size (NaN: the task's declared checkpoint_gb)
    restarts: int = 0
    started: bool = False  # the runner said it started where it is now
    refused: list[str] = field(default_factory=list)  # nodes that refused it or where it failed to start
    rollback: tuple | None = None  # a move not confirmed yet: (nodes, baseline p95, loss, window end, left)
    ran_s: float = 0.0  # time it ran at its earlier placements (a move adds the time since placed_at)
    start_at: float = 0.0  # not to start before (power-aware starts); its start timeout counts from then
    save_s: float = math.nan  # how long its last checkpoint took to save (its checkpoint event's duration_s)
    restore_s: float = math.nan  # how long its last resume took (a started event's duration_s after a move)
    done_share: float = math.nan  # the share of its run done, as its runner's last progress event said

    def left_s(self, here_s, now: float, min_share: float):
        """What is left of its run, which takes ``here_s`` where it is: the share its runner says is not
        done yet, else estimated from the time it ran (core.ect.left_here); never below ``min_share``."""
        if math.isfinite(self.done_share):
            return np.maximum((1.0 - self.done_share) * np.asarray(here_s, np.float64), min_share * np.asarray(here_s))
        return left_here(here_s, self.ran_for(now), min_share)

    def deadline_near(self, now: float, max_wait_s: float) -> bool:
        """A deferrable task whose slack is down to ``max_wait_s``: pausing it could cost its
        deadline, so it is never preempted (nor its cards reclaimed)."""
        return bool(slack_s(self.task, self.ran_for(now), now) <= max_wait_s)

    def ran_for(self, now: float) -> float:
        """How long it has run, over all its placements (what its remaining time is estimated from)."""
        return self.ran_s + max(now - self.placed_at, 0.0)

    @property
    def progress_since(self) -> float:
        """Where a restart resumes from: its last checkpoint, else its placement."""
        return self.checkpoint_at if math.isfinite(self.checkpoint_at) else self.placed_at

    def work_lost(self, now: float) -> float:
        """What stopping it now loses: the time since :attr:`progress_since`, or nothing while no runner
        said it started where it is (placed, or moved, and not begun there: there is nothing to lose)."""
        return max(now - self.progress_since, 0.0) if self.started else 0.0

    @property
    def state_gb(self) -> float:
        """What a move or a restart transfers: the last checkpoint's size, else the declared one."""
        return self.checkpoint_gb if math.isfinite(self.checkpoint_gb) else self.task.checkpoint_gb


@_tells_books("task", "held")
@dataclass
class Pending(_Needs):
    task: Task
    submitted_at: float
    restarts: int = 0
    resume_from: float | None = None  # the checkpoint a re-queued task resumes from
    queued_at: float = math.nan  # when it (last) joined the queue; nan: at submission
    held: bool = False  # an operator holds it: not placed until released
    far: str = ""  # why a gang that fits waits (gangs.too_far), as its last decision said; "" otherwise
    alpha: float = math.nan  # the alpha its last decision (or its run, when re-queued) carried; NaN: none yet

    def waited(self, now: float) -> float:
        return now - (self.queued_at if math.isfinite(self.queued_at) else self.submitted_at)


def slack_s(task: Task, ran_s: float, now: float) -> float:
    """A deferrable task's slack: its deadline less now less the time it still needs (its expected
    duration less what it ran); NaN for a task without a deadline."""
    if task.deferrable_until is None:
        return math.nan
    return task.deferrable_until - now - max(task.expected_duration_s - ran_s, 0.0)
