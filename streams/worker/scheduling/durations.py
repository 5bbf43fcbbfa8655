"""Run times predicted from history (issue 52): a task is planned with its own expected duration times
the mean share of their expected durations its submitter's last two runs took, never more than its
own figure (core.estimates.predicted_runs; the last two after Tsafrir, Etsion & Feitelson, IEEE TPDS
2007); the figure the user gave stays what a task that runs past its prediction is planned with from
then on, and its time limit (``time_limit_s``) stays the kill bound.

A submitter is the task's ``submitted_by`` (the API sets it to the token's name), else its team; a
task with neither (an anonymous submission: ITP's trace has no users) is planned with its own figure
times the mean share the pool's last :data:`POOL_KEEP` runs took (everyone's: an anonymous task has
no record of its own, and its figure alone reads a limit as the run — ITP's replayed limits are up to
five times their runs). A submitter with no run yet is planned with its own figure, as Tsafrir et
al. do.

A run is counted in the reference's seconds (the pool's slowest card, as expected durations are
read): its wall time from placement to finish times its slowest member's card speed, over the
expected duration its user gave. Kept in memory: a restarted worker learns again from its next
finishes."""

from __future__ import annotations

from collections import deque

import numpy as np

from core.estimates import predicted_runs
from schemas.sched import Task

KEEP = 2  # runs per submitter (Tsafrir et al.: the last two)
# runs the pool's share is the mean of (chosen, not tuned: steady — the mean of a hundred shares spread
# over 0-1 is within about 0.03 of its own — and on a pool of hundreds of nodes a day of finishes, so a
# change of the mix shows within one)
POOL_KEEP = 100


def submitter(task: Task) -> str:
    return task.submitted_by or task.team or ""


class Durations:
    def __init__(self) -> None:
        self.ratios: dict[str, deque] = {}  # submitter -> its last KEEP runs over their users' figures
        self.pool: deque = deque(maxlen=POOL_KEEP)  # every submitter's last runs, over their figures
        self.given: dict[str, float] = {}  # task id -> the expected duration its user gave, while a prediction stands

    def planned(self, task: Task) -> Task:
        """``task`` with its predicted expected duration (itself when the prediction is its own figure,
        or it was predicted already)."""
        who = submitter(task)
        got = list(self.ratios.get(who, ()) if who else self.pool)
        if task.id in self.given or not got:
            return task
        p = max(float(predicted_runs([task.expected_duration_s], np.array([got], np.float64))[0]), 1.0)
        if p >= task.expected_duration_s:
            return task
        self.given[task.id] = task.expected_duration_s
        return task.model_copy(update={"expected_duration_s": p})

    def finished(self, task: Task, wall_s: float, slowest_speed: float) -> None:
        """A task finished after ``wall_s`` on members whose slowest card is ``slowest_speed`` times the
        reference: its submitter's history gains the run, over the figure the task's user gave."""
        gave = self.given.pop(task.id, task.expected_duration_s)
        who = submitter(task)
        if np.isfinite(wall_s) and wall_s > 0 and gave > 0:
            share = wall_s * max(slowest_speed, 1e-9) / gave
            self.pool.append(share)
            if who:
                self.ratios.setdefault(who, deque(maxlen=KEEP)).append(share)

    def overdue(self, running, pending, now: float) -> None:
        """Running tasks past their prediction are planned with the figure their user gave from now on
        (only the predicted ones that run are looked at: the queue may hold thousands); tasks neither
        running nor queued are forgotten once they are as many as the live ones."""
        for tid in self.given.keys() & running.keys():
            r = running[tid]
            if r.ran_for(now) > r.task.expected_duration_s:
                r.task = r.task.model_copy(update={"expected_duration_s": self.given.pop(tid)})
        if len(self.given) > 2 * (len(running) + len(pending)) + 64:
            self.given = {t: v for t, v in self.given.items() if t in running or t in pending}
