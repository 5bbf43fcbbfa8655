"""A write's answer (POST /tasks and the like) waits CNSCHED_DECISION_TIMEOUT_SECONDS for its owner to
apply it — counted from when this worker's kernels are compiled: on a fresh checkout the first tasks
came back 202 while the deciding worker compiled them."""

from __future__ import annotations

import threading
import time

from streams.config import Settings
from streams.web.base import WebContext, until_applied
from streams.worker.health import Readiness
from streams.worker.warm import KernelWarmer


def context(timeout_s: float, warmer: KernelWarmer | None) -> WebContext:
    readiness = Readiness(None)
    readiness.warmer = warmer
    return WebContext(None, None, Settings(decision_timeout_seconds=timeout_s), None, None, None, None, readiness)


async def test_the_clock_starts_when_the_kernels_are_ready():
    warmer = KernelWarmer()  # not started: done when the test says
    applied_at = time.monotonic() + 0.6

    async def read():
        return "placed" if time.monotonic() >= applied_at else None

    threading.Timer(0.5, warmer.done.set).start()
    # 0.3 s to answer, but the kernels take 0.5 s: the answer at 0.6 s is within 0.3 s of them
    assert await until_applied(context(0.3, warmer), read, bool) == "placed"


async def test_without_compiling_the_timeout_stands():
    warmer = KernelWarmer()
    warmer.done.set()
    applied_at = time.monotonic() + 0.6

    async def read():
        return "placed" if time.monotonic() >= applied_at else None

    t = time.monotonic()
    assert await until_applied(context(0.3, warmer), read, bool) is None
    assert await until_applied(context(0.3, None), read, bool) is None
    assert time.monotonic() - t < 0.6 + 0.5  # two timeouts of 0.3 s, not a wait for the answer


async def test_a_compile_that_never_ends_is_waited_for_a_bounded_time(monkeypatch):
    import streams.web.base as base

    monkeypatch.setattr(base, "WARM_WAIT_S", 0.2)

    async def read():
        return None

    t = time.monotonic()
    assert await until_applied(context(0.1, KernelWarmer()), read, bool) is None
    assert 0.25 <= time.monotonic() - t < 2.0
