"""Failures watched from the scheduler's own view: which nodes failed and where it lies
(core.failures over the inventory arrays and the path table), kept as incidents from detection to
recovery. An incident is mitigated when none of the tasks that ran on the node still does (moved,
re-queued, ended) and recovered when the node is healthy again or gone from the inventory."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.failures import UNKNOWN, node_failures, paths_lost
from schemas.sched import Incident
from streams.adapters.inventory import NodeView


def health(nodes: NodeView, path_nodes: np.ndarray, loss: np.ndarray, now: float,
           timeout_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(failed bool[N], cause object[N]) of every node; ``path_nodes``, ``loss``: the paths' nodes
    and losses as a path table holds them (path_table.path_losses)."""
    known, lost = paths_lost(path_nodes, loss, len(nodes.ids))
    return node_failures(now - nodes.report_at, nodes.reported_down, timeout_s, known, lost)


@dataclass
class Open:
    detected_at: float
    cause: str
    located_at: float | None
    tasks: list[str]
    work_lost_s: float
    mitigated_at: float | None = None  # its tasks elsewhere, queued or ended; the node still down
    outcomes: dict[str, str] = field(default_factory=dict)


@dataclass
class IncidentBook:
    """Node failures from detection to recovery. An incident is open while the node is down; it is
    mitigated (still open) once none of its tasks runs there any more (moved, re-queued, ended), and
    recovered only when the node is back or gone from the inventory."""

    open: dict[str, Open] = field(default_factory=dict)

    def unmitigated(self) -> bool:
        """Whether some failed node still has tasks on it (they move at once)."""
        return any(inc.mitigated_at is None for inc in self.open.values())

    def update(self, nodes: NodeView, failed: np.ndarray, cause: np.ndarray, running: dict, now: float,
               outcome=None) -> list[Incident]:
        """Open incidents for newly failed nodes, locate those still unknown, mark mitigated the ones
        whose tasks are gone from the node, recover those whose node is back or removed; the messages
        to publish. ``outcome(task id) -> str``: what became of a task, said once it is mitigated."""
        out = []
        on_node: dict[str, list] = {}
        for r in running.values():
            for n in r.nodes:
                on_node.setdefault(n, []).append(r)
        for i, node in enumerate(nodes.ids):
            inc = self.open.get(node)
            if failed[i] and inc is None:
                runs = on_node.get(node, [])
                located = None if cause[i] == UNKNOWN else now
                inc = self.open[node] = Open(now, str(cause[i]), located, sorted(r.task.id for r in runs),
                                             sum(max(now - r.progress_since, 0.0) for r in runs),
                                             mitigated_at=None if runs else now)  # no tasks: nothing to move
                out.append(_message(node, inc, "open"))
            elif inc is not None and failed[i] and inc.located_at is None and cause[i] != UNKNOWN:
                inc.cause, inc.located_at = str(cause[i]), now
                out.append(_message(node, inc, "open"))
            if inc is None:
                continue
            if not failed[i]:
                out.append(_message(node, inc, "recovered", now, "node back"))
                del self.open[node]
            elif inc.mitigated_at is None and not any(r.task.id in inc.tasks for r in on_node.get(node, [])):
                inc.mitigated_at = now
                inc.outcomes = {t: outcome(t) for t in inc.tasks} if outcome is not None else {}
                out.append(_message(node, inc, "mitigated"))
        for node in [n for n in self.open if n not in nodes.index]:  # removed from the inventory
            out.append(_message(node, self.open.pop(node), "recovered", now, "node removed"))
        return out


def open_incidents(book: IncidentBook) -> list[Incident]:
    """The incidents open now (mitigated ones among them: the node is still down), oldest first."""
    return sorted((_message(node, inc, "open" if inc.mitigated_at is None else "mitigated")
                   for node, inc in book.open.items()), key=lambda i: i.detected_at)


def _message(node: str, inc: Open, status: str, recovered_at: float | None = None,
             resolution: str | None = None) -> Incident:
    return Incident(node=node, status=status, cause=inc.cause, detected_at=inc.detected_at, located_at=inc.located_at,
                    mitigated_at=inc.mitigated_at, recovered_at=recovered_at, tasks=inc.tasks,
                    work_lost_s=round(inc.work_lost_s, 3), outcomes=inc.outcomes, resolution=resolution)
