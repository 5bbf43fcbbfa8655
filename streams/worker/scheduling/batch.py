"""A burst of tasks of one network profile scored on every node in one kernel call (what
Scheduler.decide_many places from)."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.energy import blend
from core.scoring import best_load_s, score_all, score_parts
from core.sensitivity import WORKER_TRAFFIC_KINDS, one_node_alphas, task_alpha
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import endpoints, scoring_inputs


class BatchScores:
    """Tasks of one network profile scored on every node in one kernel call: the composite (energy
    blended in for the tasks that ask), its network part, and the compute-only counterfactual (the
    same tasks at alpha 1, composite only)."""

    def __init__(self, sched, tasks: list[Task], nodes: NodeView, profile: str) -> None:
        self.profile = profile
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
        raw, self.network = score_parts(self.x)
        w = np.array([t.cost_sensitivity for t in tasks])
        self.composite = blend(raw, w, nodes.energy) if (w > 0).any() else raw
        self.compute_only = score_all(dataclasses.replace(self.x, alpha=np.ones(len(tasks), np.float32)))


def one_node_training(task: Task, types) -> bool:
    """A training task on one node whose alpha is the type's rule (not given, not learned): its low
    alpha would speak of traffic between workers it does not have (core.sensitivity.one_node_alphas)."""
    d = types[task.type]
    return task.peers <= 1 and task.alpha is None and not d.learned and d.kind in WORKER_TRAFFIC_KINDS
