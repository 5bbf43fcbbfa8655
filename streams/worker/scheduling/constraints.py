"""A task's placement constraints (schemas.sched.Constraints) as filter reasons over the node view:
data residency (regions), tiers (centre, province, edge), soft anti-affinity within a group
(spread: a service's replicas on distinct nodes while enough fit), rack affinity for gangs — and for
every gang, one workload manager's cluster (a Slurm job runs in one cluster: where nodes name several,
the gang goes to the cluster where its best whole gang fits)."""

from __future__ import annotations

import numpy as np

from core.feasibility import covers
from core.placement import best_group
from core.scoring import ANTI_AFFINITY, FEASIBLE, OTHER_CLUSTER, OTHER_RACK
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import constraint_reasons, need


def constrained(running: dict, task: Task, nodes: NodeView, usable: np.ndarray, reasons: np.ndarray,
                composite: np.ndarray) -> np.ndarray:
    """``reasons`` with the task's constraints applied: residency and tiers rule nodes out; spread
    rules out the nodes its group's running tasks hold while enough others fit (soft
    anti-affinity); same_rack keeps a gang to the rack where its best whole gang fits; a gang stays in
    one cluster (:func:`one_cluster`)."""
    if task.peers > 1 and len(nodes.cluster_names) > 1:
        reasons = one_cluster(task, nodes, usable, reasons, composite)
    c = task.constraints
    if c is None:
        return reasons
    ruled = constraint_reasons(task, nodes)
    if ruled is not None:
        reasons = np.where(reasons == FEASIBLE, ruled, reasons).astype(np.int8)
    fits = (reasons == FEASIBLE) & covers(usable, need(task))
    if c.spread and c.group:
        held = np.zeros(len(nodes.ids), bool)
        held[[nodes.index[n] for r in running.values() if r.task.id != task.id and r.task.constraints
              and r.task.constraints.group == c.group for n in r.nodes if n in nodes.index]] = True
        if int((fits & ~held).sum()) >= task.peers:
            reasons = np.where((reasons == FEASIBLE) & held, ANTI_AFFINITY, reasons).astype(np.int8)
            fits &= ~held
    if c.same_rack and task.peers > 1:
        names = {r: i for i, r in enumerate(sorted(set(nodes.racks) - {""}))}
        codes = np.array([names.get(r, -1) for r in nodes.racks], np.int64)
        rack = best_group(composite, codes, fits, task.peers)
        reasons = np.where((reasons == FEASIBLE) & (codes != (-2 if rack is None else rack)), OTHER_RACK,
                           reasons).astype(np.int8)
    return reasons


def one_cluster(task: Task, nodes: NodeView, usable: np.ndarray, reasons: np.ndarray,
                composite: np.ndarray) -> np.ndarray:
    """``reasons`` with every node outside one cluster ruled out (``outside_the_gangs_cluster``): the
    cluster whose ``peers`` best fitting nodes score highest (core.placement.best_group; none holds
    the gang now: every node out, it waits)."""
    fits = (reasons == FEASIBLE) & covers(usable, need(task))
    best = best_group(composite, nodes.clusters, fits, task.peers)
    out = (reasons == FEASIBLE) & (nodes.clusters != (-1 if best is None else best))
    return np.where(out, OTHER_CLUSTER, reasons).astype(np.int8)


def allowed(task: Task, nodes: NodeView) -> np.ndarray:
    """bool[N]: the nodes the task's residency and tiers allow (what preemption may clear for it)."""
    ruled = constraint_reasons(task, nodes)
    return np.ones(len(nodes.ids), bool) if ruled is None else ruled == FEASIBLE


def masked(running: dict, task: Task, nodes: NodeView, usable: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``scores`` (one task's, over the nodes) with -inf where its constraints rule a node out (what a
    move may choose from)."""
    if task.constraints is None and (task.peers <= 1 or len(nodes.cluster_names) <= 1):
        return scores
    ok = np.isfinite(scores)
    reasons = constrained(running, task, nodes, usable, np.where(ok, FEASIBLE, 1).astype(np.int8), scores)
    return np.where(reasons == FEASIBLE, scores, -np.inf)
