"""Why a task cannot take a node: the placement's checks in one ordered list, each node charged to
the first check it fails (as kube-scheduler says "0/4 nodes are available: 2 Insufficient cpu, ...").

The checks are the ones placement applies — accelerator class (the kernel's class mask), capacity in
cards and memory (core.feasibility.covers), regions and tiers (constraints.allowed), up and open
(the node view's ``available`` and ``closed``), the team's quota room (QuotaBook.room), free cards
and memory now (``usable``), and the head of the queue's reservation. The first four depend only on
the cluster, not on what runs on it: a task fewer of whose nodes pass them than it has workers can
never run on the cluster as it is; the rest it waits for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.feasibility import covers
from schemas.sched import Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import need
from streams.worker.scheduling.constraints import allowed

NAMED = 3  # nodes named per check, the rest counted


@dataclass(frozen=True)
class Check:
    label: str  # what the nodes charged here lack, in words
    nodes: list[str]  # the nodes whose first failed check this is
    lasting: bool  # depends only on the cluster (class, capacity, residency), not on its load


@dataclass(frozen=True)
class Fit:
    """The nodes that can take one of the task's workers now, and why each other node cannot."""

    fits: np.ndarray  # bool[N]
    checks: list[Check]  # every check that charged a node, in order
    peers: int

    @property
    def never(self) -> bool:
        """Fewer nodes pass the lasting checks than the task has workers: it cannot run here as the
        cluster is, whatever ends."""
        charged = sum(len(c.nodes) for c in self.checks if c.lasting)
        return len(self.fits) - charged < self.peers

    def summary(self) -> str:
        """``k/N nodes can take a worker now (it needs P): 2 fewer than 8 free cards (a, b); ...``"""
        k, n = int(self.fits.sum()), len(self.fits)
        head = f"{k}/{n} node{'s' if n != 1 else ''} can take a worker now" + (
            f" (it needs {self.peers})" if self.peers > 1 else "")
        parts = [f"{len(c.nodes)} {c.label} ({named(c.nodes)})" for c in self.checks]
        return head + (": " + "; ".join(parts) if parts else "")


def named(ids: list[str]) -> str:
    """A few names, then a count: ``a, b, c and 7 more``."""
    return ", ".join(ids[:NAMED]) + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")


def of_classes(task: Task, nodes: NodeView) -> np.ndarray:
    """bool[N]: the nodes of an accelerator class the task accepts (all, when it names none)."""
    classes = set(task.resources.accel_classes)
    ok = np.array([not classes or c in classes for c in nodes.class_names], bool)
    return ok[nodes.node_class] if len(nodes.ids) else np.zeros(0, bool)


def fit(task: Task, nodes: NodeView, room: np.ndarray | None = None, reserved: np.ndarray | None = None,
        reserved_for: str = "") -> Fit:
    """Every check of placement over the node view, in order; ``room``: bool[N], where the task's team
    may still take cards (QuotaBook.room; None: no quotas), ``reserved``: bool[N], nodes promised to
    the head of the queue (``reserved_for``)."""
    n = need(task)
    classes = sorted(set(task.resources.accel_classes))
    cards, have = int(n[0]), nodes.capacity
    steps = [
        (f"not of accelerator class {' or '.join(classes)}", of_classes(task, nodes), True),
        (f"fewer than {cards} cards", have[:, 0] >= n[0], True),
        ("short of the memory it needs", covers(have, n), True),
        ("outside its regions or tiers", allowed(task, nodes), True),
        ("down", np.asarray(nodes.available, bool), False),
        ("cordoned or draining", ~np.asarray(nodes.closed, bool), False),
        (f"beyond team {task.team or 'default'}'s quota", room, False),
        (f"fewer than {cards} free cards", nodes.usable[:, 0] >= n[0], False),
        ("short of the free memory it needs", covers(nodes.usable, n), False),
        (f"reserved for {reserved_for}, first in line", None if reserved is None else ~reserved, False),
    ]
    left = np.ones(len(nodes.ids), bool)
    checks = []
    for label, ok, lasting in steps:
        if ok is None:
            continue
        bad = left & ~ok
        if bad.any():
            checks.append(Check(label, [nodes.ids[i] for i in np.flatnonzero(bad).tolist()], lasting))
        left &= ok
    return Fit(left, checks, task.peers)
