"""Failures watched from the scheduler's own view: which nodes failed and where it lies
(core.failures over the inventory arrays and the path table), kept as incidents from detection to
recovery. An incident is mitigated when none of the tasks that ran on the node still does (moved,
re-queued, ended) and recovered when the node is healthy again or gone from the inventory."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.failures import OBSERVERS, UNKNOWN, FailureRule, dark_paths, node_failures, paths_lost
from schemas.operations import Incident
from streams.adapters.inventory import NodeView


def health(nodes: NodeView, path_nodes: np.ndarray, loss: np.ndarray, now: float, timeout_s: float,
           observer: np.ndarray | None = None, evidence: np.ndarray | None = None, rule: FailureRule | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """(failed bool[N], cause object[N], withheld bool[N], dark paths) of every node; ``path_nodes``,
    ``loss``, ``observer``, ``evidence``: the paths' nodes, losses, probing sources and whether each is
    evidence, as path_table.path_losses gives them. Dark paths (core.failures.dark_paths): the node
    pairs, each once and in order, whose path lost every probe while both nodes are fine."""
    known, lost, observers = paths_lost(path_nodes, loss, len(nodes.ids), observer, evidence)
    failed, cause, withheld = node_failures(now - nodes.report_at, nodes.reported_down, timeout_s, known, lost,
                                            observers, now - nodes.joined_at, rule)
    dark = dark_paths(path_nodes, loss, failed | withheld | ~nodes.available, known, lost, evidence, observer,
                      (rule or FailureRule()).min_observers)
    pairs = sorted({tuple(sorted((nodes.ids[a], nodes.ids[b]))) for a, b in np.asarray(path_nodes)[dark]})
    return failed, cause, withheld, pairs


@dataclass
class Open:
    detected_at: float
    cause: str
    located_at: float | None
    tasks: list[str]
    work_lost_s: float
    mitigated_at: float | None = None  # its tasks elsewhere, queued or ended; the node still down
    outcomes: dict[str, str] = field(default_factory=dict)
    scope: str = "node"
    nodes: list[str] = field(default_factory=list)  # a site's or a path's nodes


@dataclass
class IncidentBook:
    """Failures from detection to recovery: of nodes, of whole sites and of paths. A node's incident is
    open while the node is down; it is mitigated (still open) once none of its tasks runs there any more
    (moved, re-queued, ended), and recovered only when the node is back or gone from the inventory. A
    site's (``site/<name>``) is open while every node of a site of two or more is down, located and
    mitigated when all its nodes' are, recovered when one is back. A path's (``path/<a><-><b>``) is
    open while the path between two fine nodes is dark (core.failures.dark_paths), located at once,
    mitigated when no task runs on both its ends, recovered when it carries probes again (or an end
    fails: that node's incident takes over)."""

    open: dict[str, Open] = field(default_factory=dict)
    sites: dict[str, Open] = field(default_factory=dict)
    paths: dict[str, Open] = field(default_factory=dict)

    def count(self, scope: str) -> int:
        """Incidents open now of a scope (node, site, path)."""
        return len({"node": self.open, "site": self.sites, "path": self.paths}[scope])

    def unmitigated(self) -> bool:
        """Whether some failed node or dark path still has tasks on it (they move at once; not on a
        withheld node)."""
        return any(inc.mitigated_at is None and inc.cause != OBSERVERS
                   for inc in (*self.open.values(), *self.paths.values()))

    def update(self, nodes: NodeView, failed: np.ndarray, cause: np.ndarray, running: dict, now: float,
               outcome=None, withheld: np.ndarray | None = None, dark: list[tuple[str, str]] = ()) -> list[Incident]:
        """Open incidents for newly failed nodes, locate those still unknown, mark mitigated the ones
        whose tasks are gone from the node, recover those whose node is back or removed; the messages
        to publish. ``outcome(task id) -> str``: what became of a task, said once it is mitigated.
        ``withheld``: nodes failing on their paths among too many at once (core.failures): an incident
        of cause ``observers`` each, their tasks left where they are, recovered when their paths are back.
        Then whole sites, and ``dark`` paths (node pairs)."""
        out = self._nodes(nodes, failed, cause, running, now, outcome, withheld)
        down = failed if withheld is None else failed | withheld
        return out + self._sites(nodes, down, now) + self._paths(dark, running, now, outcome)

    def _nodes(self, nodes, failed, cause, running, now, outcome, withheld) -> list[Incident]:
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

    def _sites(self, nodes: NodeView, down: np.ndarray, now: float) -> list[Incident]:
        """A site of two or more nodes, every one down, as one incident over its nodes' incidents."""
        if not self.sites and not down.any():  # the usual case, asked at every rescoring tick
            return []
        out, members = [], {}
        for i, site in enumerate(nodes.sites):
            if site:
                members.setdefault(str(site), []).append(i)
        for site, rows in members.items():
            key, inc = f"site/{site}", self.sites.get(f"site/{site}")
            dark = len(rows) >= 2 and bool(down[rows].all())
            if not dark:
                if inc is not None:
                    out.append(_message(key, self.sites.pop(key), "recovered", now, "site back"))
                continue
            parts = [self.open[nodes.ids[i]] for i in rows if nodes.ids[i] in self.open]
            causes = {p.cause for p in parts}
            why = causes.pop() if len(causes) == 1 else OBSERVERS if OBSERVERS in causes else "both"
            located = max((p.located_at for p in parts), default=None) \
                if parts and all(p.located_at is not None for p in parts) else None
            mitigated = max(p.mitigated_at for p in parts) \
                if parts and all(p.mitigated_at is not None for p in parts) else None
            if inc is None:
                inc = self.sites[key] = Open(now, why, located, sorted({t for p in parts for t in p.tasks}),
                                             sum(p.work_lost_s for p in parts), mitigated, {}, "site",
                                             sorted(nodes.ids[i] for i in rows))
                out.append(_message(key, inc, "open"))
            elif (why, located) != (inc.cause, inc.located_at) and inc.mitigated_at is None:
                inc.cause, inc.located_at = why, located
                out.append(_message(key, inc, "open"))
            if inc.mitigated_at is None and mitigated is not None:
                inc.mitigated_at = mitigated
                inc.outcomes = {t: o for p in parts for t, o in p.outcomes.items()}
                out.append(_message(key, inc, "mitigated"))
        for key in [k for k in self.sites if k.removeprefix("site/") not in members]:  # its nodes all removed
            out.append(_message(key, self.sites.pop(key), "recovered", now, "site back"))
        return out

    def _paths(self, dark: list[tuple[str, str]], running: dict, now: float, outcome) -> list[Incident]:
        """Dark paths: the tasks that run on both ends at detection, mitigated once none does."""
        out, now_dark = [], {f"path/{a}<->{b}": (a, b) for a, b in dark}
        for key, (a, b) in now_dark.items():
            inc = self.paths.get(key)
            spanning = sorted(r.task.id for r in running.values() if a in r.nodes and b in r.nodes)
            if inc is None:
                runs = [running[t] for t in spanning]
                inc = self.paths[key] = Open(now, "network", now, spanning, sum(r.work_lost(now) for r in runs),
                                             None if spanning else now, {}, "path", [a, b])
                out.append(_message(key, inc, "open"))
            elif inc.mitigated_at is None and not set(inc.tasks) & set(spanning):
                inc.mitigated_at = now
                inc.outcomes = {t: outcome(t) for t in inc.tasks} if outcome is not None else {}
                out.append(_message(key, inc, "mitigated"))
        for key in [k for k in self.paths if k not in now_dark]:
            inc = self.paths.pop(key)
            ends_down = any(n in self.open for n in inc.nodes)
            out.append(_message(key, inc, "recovered", now, "an end failed" if ends_down else "path back"))
        return out


def open_incidents(book: IncidentBook) -> list[Incident]:
    """The incidents open now (mitigated ones among them: the node, site or path is still down), oldest
    first."""
    every = (*book.open.items(), *book.sites.items(), *book.paths.items())
    return sorted((_message(key, inc, "open" if inc.mitigated_at is None else "mitigated") for key, inc in every),
                  key=lambda i: i.detected_at)


def _message(node: str, inc: Open, status: str, recovered_at: float | None = None,
             resolution: str | None = None) -> Incident:
    return Incident(node=node, status=status, cause=inc.cause, detected_at=inc.detected_at, located_at=inc.located_at,
                    mitigated_at=inc.mitigated_at, recovered_at=recovered_at, tasks=inc.tasks,
                    work_lost_s=round(inc.work_lost_s, 3), outcomes=inc.outcomes, resolution=resolution,
                    scope=inc.scope, nodes=inc.nodes)
