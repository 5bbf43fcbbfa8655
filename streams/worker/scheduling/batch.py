"""A burst of tasks of one network profile scored on every node in one kernel call (what
Scheduler.decide_many places from)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from core.energy import blend
from core.scoring import best_load_s, score_all, score_parts
from core.sensitivity import WORKER_TRAFFIC_KINDS, one_node_alphas, task_alpha
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoints, scoring_inputs

QUEUE_CHUNK = 8  # a queue retry scores its tasks 8, 16, 32, ... at a time as it reaches them (ChunkedScores)


class BatchScores:
    """Tasks of one network profile scored on every node in one kernel call: the composite (energy
    blended in for the tasks that ask), its network part, and the compute-only counterfactual (the
    same tasks at alpha 1, composite only)."""

    def __init__(self, sched, tasks: list[Task], nodes: NodeView, profile: str) -> None:
        self.profile = profile
        self.load_rows: dict = {}  # decision.loads_at's rows, per (data endpoint, GB) of these inputs
        alphas = [task_alpha(t.type, t.alpha, t.strategy, sched.types) for t in tasks]
        eps = endpoints(tasks)
        self.net = sched.network(eps, nodes, profile)
        self.x = x = scoring_inputs(tasks, alphas, nodes, eps, self.net, sched.types, scope=sched.compute_scope)
        one = np.array([one_node_training(t, sched.types) for t in tasks], bool)
        if one.any():  # the network weighs what a one-node training task spends on it: its loads
            alphas = one_node_alphas(np.array(alphas), one, best_load_s(x),
                                     np.array([t.expected_duration_s for t in tasks], np.float64)).tolist()
            x.alpha = np.array(alphas, np.float32)
        self.alphas = alphas
        if not nodes.ids:
            empty = np.zeros((len(tasks), 0), np.float32)
            self.composite = self.network = self.compute_only = empty
            return
        # the compute-only counterfactual, which decisions audit, from the same kernel pass
        raw, self.network, *co = score_parts(self.x, compute_only=sched.audit)
        if co:
            self.compute_only = co[0]
        w = np.array([t.cost_sensitivity for t in tasks])
        self.composite = blend(raw, w, nodes.energy) if (w > 0).any() else raw

    @functools.cached_property
    def compute_only(self) -> np.ndarray:
        """The same tasks at alpha 1 (composite only): from the composite's kernel pass when decisions
        are audited, else scored when first asked."""
        return score_all(dataclasses.replace(self.x, alpha=np.ones(len(self.alphas), np.float32)))


class ChunkedScores:
    """The tasks of one profile in a burst, scored as the burst reaches them: from the first one asked
    for, ``first`` tasks in one kernel call, then twice as many from the next one not yet scored, and so
    on. A task's row depends on the task and the node view only (the kernel, the network gather, the
    energy blend and the one-node alpha are row by row), so it is the same in any chunk; retrying a long
    queue then scores the few tasks it reaches instead of all of them. ``first`` = the number of tasks:
    one call, as BatchScores."""

    def __init__(self, sched, tasks: list[Task], nodes: NodeView, profile: str, first: int) -> None:
        self.sched, self.tasks, self.nodes, self.profile = sched, tasks, nodes, profile
        self.size = max(first, 1)
        self.rows: dict[int, tuple[BatchScores, int]] = {}

    def __getitem__(self, k: int) -> tuple[BatchScores, int]:
        """(the BatchScores holding task ``k``, its row there)."""
        hit = self.rows.get(k)
        if hit is None:
            part = range(k, min(k + self.size, len(self.tasks)))
            self.size *= 2
            b = BatchScores(self.sched, [self.tasks[i] for i in part], self.nodes, self.profile)
            self.rows.update({i: (b, r) for r, i in enumerate(part)})
            hit = self.rows[k]
        return hit


def profile_of(task: Task, types) -> str:
    """The network profile a task is scored by: its own, else its type's."""
    return kind_profile((task.network_profile, task.type), types)


def kind_profile(kind: tuple, types) -> str:
    """:func:`profile_of` of a task of this kind: (its own network profile or None, its type)."""
    return kind[0] or types[kind[1]].profile


def by_profile(sched, tasks: list[Task], nodes: NodeView, first: int | None,
               kinds: tuple[np.ndarray, list[tuple]] | None = None):
    """The tasks' scores, one ChunkedScores per network profile (``first``: its first chunk; None:
    each profile's tasks in one call): returns ``scores(j)``, (the BatchScores holding task j, its
    row there). ``kinds``: (int64[T] each task's kind code, the (network_profile, type) of each code),
    as the pending book keeps them for a queue's retry (a retry asks about the whole queue: the
    profile is then read once per kind, not per task); None: read from the tasks."""
    if kinds is None:
        table: dict[tuple, int] = {}
        kinds = (np.array([table.setdefault((t.network_profile, t.type), len(table)) for t in tasks], np.int64),
                 list(table))
    code, keys = kinds
    names = [kind_profile(k, sched.types) for k in keys]
    profiles = sorted(set(names))
    of_task = np.array([profiles.index(x) for x in names], np.int64)[code] if len(code) else code
    place = np.zeros(len(tasks), np.int64)  # each task's place in its profile's tasks
    chunks = []
    for p, profile in enumerate(profiles):
        group = np.flatnonzero(of_task == p)
        place[group] = np.arange(group.size)
        chunks.append(ChunkedScores(sched, [tasks[j] for j in group.tolist()], nodes, profile,
                                    first or group.size))

    def scores(j: int) -> tuple[BatchScores, int]:
        return chunks[of_task[j]][int(place[j])]

    return scores


def one_node_training(task: Task, types) -> bool:
    """A training task on one node whose alpha is the type's rule (not given, not learned): its low
    alpha would speak of traffic between workers it does not have (core.sensitivity.one_node_alphas)."""
    d = types[task.type]
    return task.peers <= 1 and task.alpha is None and not d.learned and d.kind in WORKER_TRAFFIC_KINDS
