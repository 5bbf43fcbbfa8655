"""Node maintenance: cordon, drain and uncordon from `sched.maintenance` (an operator's POST
/nodes/{node}/cordon|drain|uncordon or `cnsched cordon|drain|uncordon`), kept in the `maintenance`
table (the latest command per node) and read by the scheduler as a :class:`MaintenanceBook`.

A cordoned node takes no new work; its work stays. A draining node takes none either, and its work
moves at its next checkpoint (or at once when it has not started), by its deadline at the latest
(then wherever it fits; re-queued from its checkpoint when nothing fits). A node that reports status
``leaving`` drains the same way, from when it first said so."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import faust
import numpy as np

from schemas.operations import NodeCommand
from streams.config import Settings
from streams.kafka import MAINTENANCE_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import guarded, validated

log = logging.getLogger(__name__)
CORDONED, DRAINING = "cordoned", "draining"


@dataclass
class MaintenanceBook:
    """The commands in force per node (uncordoned nodes are absent) and when each leaving node first
    said so. ``loader()``: the table's commands, read again after :meth:`invalidate`."""

    drain_deadline_s: float = 3600.0
    loader: object = None
    _commands: dict[str, NodeCommand] = field(default_factory=dict)
    _stale: bool = True
    leaving_since: dict[str, float] = field(default_factory=dict)
    version: int = 0

    def invalidate(self) -> None:
        self._stale = True

    def commands(self) -> dict[str, NodeCommand]:
        if self._stale:
            self._stale = False
            if self.loader is not None:
                self._commands = {c.node: c for c in self.loader() if c.action not in ("uncordon", "remove")}
                self.version += 1
        return self._commands

    def apply(self, cmd: NodeCommand) -> None:
        cur = self.commands()
        if cmd.action in ("uncordon", "remove"):
            cur.pop(cmd.node, None)
        else:
            cur[cmd.node] = cmd
        self.version += 1

    def arrays(self, ids: list[str], leaving: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(closed bool[N]: takes no new work, draining bool[N], drain_since float[N], drain_due float[N]:
        when its work must have moved) — cordoned, draining, or reporting leaving."""
        cmds = self.commands()
        n = len(ids)
        if not cmds and not self.leaving_since and not leaving.any():  # the usual case: nothing to say
            return np.zeros(n, bool), np.zeros(n, bool), np.full(n, np.inf), np.full(n, np.inf)
        for i, node in enumerate(ids):
            if leaving[i]:
                self.leaving_since.setdefault(node, now)
            else:
                self.leaving_since.pop(node, None)
        closed, draining = np.zeros(n, bool), np.zeros(n, bool)
        since, due = np.full(n, np.inf), np.full(n, np.inf)
        for i, node in enumerate(ids):
            c = cmds.get(node)
            if c is not None:
                closed[i] = True
                if c.action == "drain":
                    draining[i], since[i] = True, c.at
                    due[i] = c.at + (self.drain_deadline_s if c.deadline_s is None else c.deadline_s)
            if node in self.leaving_since:
                closed[i] = draining[i] = True
                since[i] = min(since[i], self.leaving_since[node])
                due[i] = min(due[i], self.leaving_since[node] + self.drain_deadline_s)
        return closed, draining, since, due

    def state_of(self, node: str) -> str | None:
        c = self.commands().get(node)
        if node in self.leaving_since or (c is not None and c.action == "drain"):
            return DRAINING
        return CORDONED if c is not None else None


def register(app: faust.App, topics, settings: Settings, counters: Counters, book: MaintenanceBook, changed,
             inv=None) -> None:
    """The agent: each valid command is kept in the table and applied to ``book``; ``changed()``
    (the scheduler's books_changed) runs after it. ``remove`` also takes the node out of ``inv`` (the
    inventory: state_tables.Inventory, on this worker beside the scheduler)."""
    counters.describe("maintenance_commands_total", "cordon, drain and uncordon commands applied, by action")
    table = app.Table(table_name(settings, MAINTENANCE_TABLE), key_type=bytes, value_type=bytes, partitions=1)
    book.loader = lambda: [NodeCommand.model_validate_json(v) for v in list(table.values()) if v]
    book.invalidate()

    @app.agent(topics.maintenance, name="maintenance")
    async def maintenance_agent(stream):
        async for event in stream.events():
            cmd, _ = await validated(NodeCommand, event, topics.sched_deadletter, "maintenance: ")
            if cmd is None:
                continue

            async def step(cmd=cmd):
                book.commands()  # read the table first (after a restart)
                table[cmd.node.encode()] = cmd.model_dump_json().encode()
                book.apply(cmd)
                if cmd.action == "remove" and inv is not None:
                    inv.delete(cmd.node.encode())
                changed()
                counters.inc("maintenance_commands_total", action=cmd.action)
                log.info("node %s: %s by %s (%s)", cmd.node, cmd.action, cmd.by or "-", cmd.reason or "-")

            await guarded(event, topics.sched_deadletter, counters, step)

    @app.on_partitions_assigned.connect
    async def on_assigned(app, assigned, **kwargs):
        book.invalidate()
