"""Failures watched from the scheduler's own view: which nodes failed and where it lies
(core.failures over the inventory arrays and the path table), kept as incidents from detection to
recovery. An incident is recovered when none of the tasks that ran on the node still does (moved,
ended) or the node is healthy again."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.failures import UNKNOWN, node_failures, paths_lost
from schemas.sched import Incident
from streams.adapters.inventory import NodeView
from streams.worker.scheduling.path_table import PathTable


def health(nodes: NodeView, pt: PathTable, now: float, timeout_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(failed bool[N], cause object[N]) of every node."""
    known, lost = paths_lost(pt.path_nodes, pt.loss, len(nodes.ids))
    return node_failures(now - nodes.report_at, nodes.reported_down, timeout_s, known, lost)


@dataclass
class Open:
    detected_at: float
    cause: str
    located_at: float | None
    tasks: list[str]
    work_lost_s: float


@dataclass
class IncidentBook:
    open: dict[str, Open] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # recovered (tasks elsewhere), the node still failed

    def update(self, nodes: NodeView, failed: np.ndarray, cause: np.ndarray, running: dict, now: float,
               outcome=None) -> list[Incident]:
        """Open incidents for newly failed nodes, locate those still unknown, recover the ones whose
        tasks are gone from the node (or the node is back); the messages to publish. ``outcome(task
        id) -> str``: what became of a task, said in the recovered message."""
        out = []
        on_node: dict[str, list] = {}
        for r in running.values():
            for n in r.nodes:
                on_node.setdefault(n, []).append(r)
        for i, node in enumerate(nodes.ids):
            inc = self.open.get(node)
            if not failed[i]:
                self.settled.discard(node)
            if failed[i] and inc is None and node not in self.settled:
                runs = on_node.get(node, [])
                located = None if cause[i] == UNKNOWN else now
                inc = self.open[node] = Open(now, str(cause[i]), located, sorted(r.task.id for r in runs),
                                             sum(max(now - r.progress_since, 0.0) for r in runs))
                out.append(_message(node, inc, "open"))
            elif inc is not None and failed[i] and inc.located_at is None and cause[i] != UNKNOWN:
                inc.cause, inc.located_at = str(cause[i]), now
                out.append(_message(node, inc, "open"))
            moved_off = bool(inc and inc.tasks) and not any(r.task.id in inc.tasks for r in on_node.get(node, []))
            if inc is not None and (not failed[i] or moved_off):
                said = {t: outcome(t) for t in inc.tasks} if outcome is not None and failed[i] else {}
                out.append(_message(node, inc, "recovered", now).model_copy(update={"outcomes": said}))
                del self.open[node]
                if failed[i]:
                    self.settled.add(node)  # one incident per failure, not one per rescoring
        return out


def open_incidents(book: IncidentBook) -> list[Incident]:
    """The incidents open now, oldest first."""
    return sorted((_message(node, inc, "open") for node, inc in book.open.items()), key=lambda i: i.detected_at)


def _message(node: str, inc: Open, status: str, recovered_at: float | None = None) -> Incident:
    return Incident(node=node, status=status, cause=inc.cause, detected_at=inc.detected_at, located_at=inc.located_at,
                    recovered_at=recovered_at, tasks=inc.tasks, work_lost_s=round(inc.work_lost_s, 3))
