"""Failures watched from the scheduler's own view: which nodes failed and where it lies
(core.failures over the inventory arrays and the path table), kept as incidents from detection to
recovery. An incident is mitigated when none of the tasks that ran on the node still does (moved,
re-queued, ended) and recovered when the node is healthy again or gone from the inventory."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.failures import OBSERVERS, UNKNOWN, FailureRule, node_failures, paths_lost
from schemas.sched import Incident
from streams.adapters.inventory import NodeView


def health(nodes: NodeView, path_nodes: np.ndarray, loss: np.ndarray, now: float, timeout_s: float,
           observer: np.ndarray | None = None, evidence: np.ndarray | None = None, rule: FailureRule | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(failed bool[N], cause object[N], withheld bool[N]) of every node; ``path_nodes``, ``loss``,
    ``observer``, ``evidence``: the paths' nodes, losses, probing sources and whether each is evidence,
    as path_table.path_losses gives them."""
    known, lost, observers = paths_lost(path_nodes, loss, len(nodes.ids), observer, evidence)
    return node_failures(now - nodes.report_at, nodes.reported_down, timeout_s, known, lost, observers,
                         now - nodes.joined_at, rule)


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
        """Whether some failed node still has tasks on it (they move at once; not on a withheld one)."""
        return any(inc.mitigated_at is None and inc.cause != OBSERVERS for inc in self.open.values())

    def update(self, nodes: NodeView, failed: np.ndarray, cause: np.ndarray, running: dict, now: float,
               outcome=None, withheld: np.ndarray | None = None) -> list[Incident]:
        """Open incidents for newly failed nodes, locate those still unknown, mark mitigated the ones
        whose tasks are gone from the node, recover those whose node is back or removed; the messages
        to publish. ``outcome(task id) -> str``: what became of a task, said once it is mitigated.
        ``withheld``: nodes failing on their paths among too many at once (core.failures): an incident
        of cause ``observers`` each, their tasks left where they are, recovered when their paths are back."""
        out = []
        on_node: dict[str, list] = {}
        for r in running.values():
            for n in r.nodes:
                on_node.setdefault(n, []).append(r)
        down = failed if withheld is None else failed | withheld
        for i, node in enumerate(nodes.ids):
            inc = self.open.get(node)
            why = str(cause[i]) if failed[i] else OBSERVERS
            if down[i] and inc is None:
                runs = on_node.get(node, [])
                located = None if why == UNKNOWN else now
                moved = failed[i] and runs  # a withheld node's tasks stay: nothing is lost
                inc = self.open[node] = Open(now, why, located, sorted(r.task.id for r in runs),
                                             sum(r.work_lost(now) for r in runs) if moved else 0.0,
                                             mitigated_at=None if runs else now)  # no tasks: nothing to move
                out.append(_message(node, inc, "open"))
            elif inc is not None and down[i] and why != inc.cause and (inc.located_at is None or inc.cause == OBSERVERS) \
                    and why != UNKNOWN:
                if inc.cause == OBSERVERS:  # a withheld failure confirmed: its tasks move now
                    inc.work_lost_s = sum(r.work_lost(now) for r in on_node.get(node, []))
                inc.cause, inc.located_at = why, now  # located, or a withheld failure confirmed
                out.append(_message(node, inc, "open"))
            if inc is None:
                continue
            if not down[i]:
                out.append(_message(node, inc, "recovered", now, "node back"))
                del self.open[node]
            elif inc.mitigated_at is None and inc.cause != OBSERVERS and \
                    not any(r.task.id in inc.tasks for r in on_node.get(node, [])):
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
