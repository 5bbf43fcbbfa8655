"""Tasks -> the job side of core.scoring.ScoringInputs (endpoints as CSR lists, needs, class masks,
penalties), over a NodeView and the network inputs of those endpoints."""

from __future__ import annotations

import functools
import weakref

import numpy as np

from core.scoring import FEASIBLE, REGION_NOT_ALLOWED, TIER_NOT_ALLOWED, ScoringInputs, class_mask
from core.sensitivity import accel_penalty
from core.vocabulary import TypeDefaults
from schemas.sched import Task
from streams.adapters.inventory import SCORE_COLUMN, NodeView, cluster_key, economy_key


def need(task: Task) -> np.ndarray:
    """float32[3]: cards, accelerator memory GB, host memory GB a task takes on each of its nodes."""
    r = task.resources
    return np.array([r.cards, r.accel_mem_gb, r.host_mem_gb], np.float32)


def endpoints_of(task: Task) -> list:
    """Where the task loads from at its start — data, model, container image (their sizes add up in the
    load time, over the path from the biggest) — and where its users are (nothing loaded: a path it
    uses all along)."""
    return [e for e in (task.data_source, task.model_repo, task.image, task.users) if e is not None]


def biggest(task: Task):
    """The endpoint the task's load time is counted over (its biggest; a staged copy is of it), or None."""
    return max(endpoints_of(task), key=lambda e: e.size_gb, default=None)


def load_source(task: Task) -> tuple[str | None, float]:
    """(the endpoint the task's load time is counted over — its biggest — or None, the GB it loads)."""
    big = biggest(task)
    return (big.node if big is not None else None), load_gb(task)


def load_gb(task: Task) -> float:
    """What one worker of the task loads at its start: data, model and image, in GB."""
    return float(sum(e.size_gb for e in endpoints_of(task)))


class ByTaskList:
    """Values remembered per list of task objects, while those same objects are asked about (rescoring
    asks about the same running tasks at every window; a new list is a new question). Keyed by the
    tasks' ids and ``extra``; an entry goes when any of its tasks does (a weak reference's callback,
    before that task's id can be reused), so finished tasks are not kept alive by it."""

    def __init__(self, most: int = 256) -> None:
        self._memo: dict[tuple, tuple] = {}  # key -> (weak references to the tasks, the value)
        self._most = most

    def get(self, tasks: list[Task], extra, make):
        key = (tuple(map(id, tasks)), extra)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= self._most:
                self._memo.clear()
            drop = functools.partial(self._drop, key)
            hit = self._memo[key] = ([weakref.ref(t, drop) for t in tasks], make())
        return hit[1]

    def _drop(self, key: tuple, _ref) -> None:
        self._memo.pop(key, None)

    def __len__(self) -> int:
        return len(self._memo)


_EPS = ByTaskList()  # a task list's endpoints (endpoints)


def endpoints(tasks: list[Task]) -> list[str]:
    """Endpoint rows: the endpoints the tasks name (data source, model repository, image), sorted. A node's
    row as an endpoint (a gang's first member) is read apart (NetworkInputs.from_node): gathering
    every node as an endpoint would make each decision O(nodes^2). Remembered per list of task objects
    (rescoring asks about the same running tasks at every window; a new list is a new question)."""
    return list(_EPS.get(tasks, None, lambda: sorted({e.node for t in tasks for e in endpoints_of(t)})))


def compute_column(task: Task, kind: str, scope: str = "auto", frugal: bool = False) -> int:
    """The column of NodeView.compute a task is scored by. Frugal work (fine-tuning, preprocessing:
    little accelerator needed) is scored by economy: its kind's score scaled down on stronger cards. Otherwise
    ``scope``: "class" (each node against the best of its class), "cluster" (against the best of
    all: standard units compared across classes), or "auto" (the default): within the class when the
    task accepts one class only — the only comparison there is — and across classes when it accepts
    several or any."""
    if frugal:
        return SCORE_COLUMN[economy_key(kind)]
    across = scope == "cluster" or (scope == "auto" and len(set(task.resources.accel_classes)) != 1)
    return SCORE_COLUMN[cluster_key(kind) if across else kind]


_ROWS: dict[int, tuple] = {}  # id(task) -> (a weak reference to it, its type's defaults, scope, class names, its row)
_ROWS_MAX = 1 << 16  # tasks remembered at most (running and queued ones are asked about at every rescoring)


def _row(t: Task, d: TypeDefaults, scope: str, class_names: list[str]) -> tuple:
    """The task's own part of its scoring row: (endpoint names, the biggest one's or None, the GB it
    loads, its class mask, its need, its compute column, its penalty), once per task object, type
    defaults, scope and class list. The entry goes with the task (a weak reference whose callback
    drops it before the task's id can be reused): a finished task is not kept alive by it."""
    hit = _ROWS.get(id(t))
    if hit is not None and hit[0]() is t and hit[1] is d and hit[2] == scope and hit[3] == class_names:
        return hit[4]
    eps = endpoints_of(t)
    big = max(eps, key=lambda e: e.size_gb, default=None)
    allowed = [class_names.index(c) for c in t.resources.accel_classes if c in class_names]
    row = ([e.node for e in eps], big.node if big is not None else None, sum(e.size_gb for e in eps),
           class_mask(allowed, bool(t.resources.accel_classes)), need(t), compute_column(t, d.kind, scope, d.frugal),
           accel_penalty(d, t.resources.cards))
    if len(_ROWS) >= _ROWS_MAX:
        _ROWS.clear()
    _ROWS[id(t)] = (weakref.ref(t, functools.partial(_forget, id(t))), d, scope, list(class_names), row)
    return row


def _forget(key: int, ref: weakref.ref) -> None:
    """A remembered task is gone: its row goes too (unless the entry is already another's)."""
    hit = _ROWS.get(key)
    if hit is not None and hit[0] is ref:
        del _ROWS[key]


_GROUPS = ByTaskList()  # a task list's job side (scoring_inputs)


def scoring_inputs(tasks: list[Task], alphas: list[float], nodes: NodeView, endpoint_ids: list[str], net,
                   types: dict[str, TypeDefaults], scope: str = "auto") -> ScoringInputs:
    """``net``: the NetworkInputs of ``endpoint_ids``; ``scope``: see compute_column. (A running
    task scored on its own node, whose resources it already holds: the same inputs with needs of
    zero, migration.py.) The job side of a list of tasks is remembered per task objects, type
    defaults, scope, class list and endpoints: rescoring asks about the same running tasks at every
    window (its arrays are shared: read them, never write them)."""
    job = _GROUPS.get(tasks, (tuple((k, id(d)) for k, d in types.items()), scope, tuple(nodes.class_names),
                              tuple(endpoint_ids)), lambda: _job_side(tasks, nodes, endpoint_ids, types, scope))
    return ScoringInputs(
        compute=nodes.compute, usable=nodes.usable, available=nodes.available, node_class=nodes.node_class,
        has_accel=nodes.has_accel, node_quality=net.node_quality, quality=net.quality,
        bandwidth_gbps=net.bandwidth, alpha=np.array(alphas, np.float32), **job)


def _job_side(tasks: list[Task], nodes: NodeView, endpoint_ids: list[str], types: dict[str, TypeDefaults],
              scope: str) -> dict[str, np.ndarray]:
    eindex = {x: i for i, x in enumerate(endpoint_ids)}
    rows = [_row(t, types[t.type], scope, nodes.class_names) for t in tasks]
    ep_lists = [[eindex[e] for e in r[0]] for r in rows]
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in ep_lists])]).astype(np.int64)
    side = {
        "kind": np.array([r[5] for r in rows], np.int64),
        "need": np.array([r[4] for r in rows], np.float32).reshape(-1, 3),
        "class_mask": np.array([r[3] for r in rows], np.int64),
        "ep_ptr": ptr, "ep_idx": np.array([i for x in ep_lists for i in x], np.int64),
        "data_ep": np.array([eindex[r[1]] if r[1] is not None else -1 for r in rows], np.int64),
        "data_gb": np.array([r[2] for r in rows], np.float32),
        "accel_penalty": np.array([r[6] for r in rows], np.float32),
    }
    for v in side.values():  # remembered and shared by every call for these tasks: a write would be a bug
        v.setflags(write=False)
    return side


def constraint_reasons(task: Task, nodes: NodeView) -> np.ndarray | None:
    """int8[N]: the nodes a task's residency and tier constraints rule out (core.scoring reasons), or
    None when it has none."""
    c = task.constraints
    if c is None or not (c.regions or c.tiers):
        return None
    r = np.zeros(len(nodes.ids), np.int8)
    if c.regions:
        r[~np.isin(nodes.regions, c.regions)] = REGION_NOT_ALLOWED
    if c.tiers:
        r[(r == FEASIBLE) & ~np.isin(nodes.tiers, c.tiers)] = TIER_NOT_ALLOWED
    return r


def endpoint_rows(x: ScoringInputs, t: int) -> np.ndarray:
    """The endpoint rows of job ``t`` in ``x``."""
    return x.ep_idx[x.ep_ptr[t]:x.ep_ptr[t + 1]]
