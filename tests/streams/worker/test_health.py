"""Readiness: not ready while recovering or rebalancing, or while an agent crash-loops."""

import asyncio
from types import SimpleNamespace

from streams.worker.health import CRASH_LOOP, CRASH_WINDOW_S, Readiness


def test_ready_unless_recovering_rebalancing_or_crash_looping():
    app = SimpleNamespace(in_recovery=False, rebalancing=False)
    r = Readiness(app)
    assert r.problems(now=1000.0) == []
    app.in_recovery, app.rebalancing = True, True
    assert len(r.problems(now=1000.0)) == 2
    app.in_recovery, app.rebalancing = False, False
    agent = SimpleNamespace(name="ingest")
    for _ in range(CRASH_LOOP - 1):
        asyncio.run(r.agent_crashed(agent, KeyError("x")))
    assert r.problems() == []  # two crashes: restarted, not a loop
    asyncio.run(r.agent_crashed(agent, KeyError("x")))
    (problem,) = r.problems()
    assert problem.startswith(f"agent ingest crash-looping: {CRASH_LOOP} crashes") and "KeyError" in problem
    last = r.crashes[-1][0]
    assert r.problems(now=last + CRASH_WINDOW_S + 1) == []  # the loop ended


def test_not_ready_while_kernels_compile_or_after_the_broker_lost_our_topics():
    from streams.worker.warm import KernelWarmer

    r = Readiness(SimpleNamespace(in_recovery=False, rebalancing=False))
    r.warmer = KernelWarmer()  # not started: still compiling
    assert r.problems() == ["compiling the forecast, scoring and decision kernels"]
    r.warmer.start()
    assert r.warmer.done.wait(120) and r.warmer.seconds is not None
    assert r.problems() == []
    r.broker_lost = "topic x is gone"
    assert r.problems() == ["the broker lost our topics (topic x is gone): restarting"]


def test_not_ready_before_the_first_join_and_recovery():
    """Before the worker first joined its group, neither flag is set: it is not ready all the same."""
    completed = asyncio.Event()
    app = SimpleNamespace(in_recovery=False, rebalancing=False,
                          tables=SimpleNamespace(recovery=SimpleNamespace(completed=completed)))
    r = Readiness(app)
    assert r.problems(now=1.0) == ["joining the consumer group and recovering state tables (first start)"]
    completed.set()
    assert r.problems(now=1.0) == []
    app.in_recovery = True  # a later rebalance
    assert r.problems(now=1.0) == ["recovering state tables from their changelogs"]
