"""Liveness and readiness of a worker.

Live: the event loop answers (``/health/live`` is 200 whenever it can be served). Ready: the worker
does its job — not while tables recover from their changelogs or partitions are being rebalanced, and
not while an agent crash-loops (CRASH_LOOP crashes of one agent within CRASH_WINDOW_S: Faust restarts
a crashed agent, so a crash loop would otherwise look healthy). ``/health`` and ``/health/ready``
answer 503 with the problems when not ready.
"""

from __future__ import annotations

import time
from collections import deque

CRASH_WINDOW_S = 60.0
CRASH_LOOP = 3


class Readiness:
    def __init__(self, app) -> None:
        self.app = app
        self.crashes: deque[tuple[float, str, str]] = deque(maxlen=256)  # (monotonic, agent, error)
        self.broker_lost: str | None = None  # set by streams/worker/broker_watch.py
        self.warmer = None  # streams.worker.warm.KernelWarmer

    def _recovered_once(self) -> bool:
        """Whether the worker has joined its group and recovered its tables at least once (before
        that, neither ``rebalancing`` nor ``in_recovery`` is set: it would look ready while it has
        nothing)."""
        try:
            return self.app.tables.recovery.completed.is_set()
        except AttributeError:  # an app without tables
            return True

    async def agent_crashed(self, agent, exc: BaseException) -> None:
        """Faust's ``on_error`` of every agent."""
        self.crashes.append((time.monotonic(), getattr(agent, "name", str(agent)), f"{type(exc).__name__}: {exc}"))

    def problems(self, now: float | None = None) -> list[str]:
        now = time.monotonic() if now is None else now
        out = []
        if not self._recovered_once():
            out.append("joining the consumer group and recovering state tables (first start)")
        elif getattr(self.app, "in_recovery", False):
            out.append("recovering state tables from their changelogs")
        if getattr(self.app, "rebalancing", False):
            out.append("partitions are being rebalanced")
        if self.warmer is not None and not self.warmer.done.is_set():
            out.append("compiling the forecast, scoring and decision kernels")
        if self.broker_lost:
            out.append(f"the broker lost our topics ({self.broker_lost[:300]}): restarting")
        recent: dict[str, list[str]] = {}
        for at, agent, error in self.crashes:
            if now - at <= CRASH_WINDOW_S:
                recent.setdefault(agent, []).append(error)
        for agent, errors in sorted(recent.items()):
            if len(errors) >= CRASH_LOOP:
                out.append(f"agent {agent} crash-looping: {len(errors)} crashes in {CRASH_WINDOW_S:g} s, "
                           f"last {errors[-1][:200]}")
        return out
