"""Heavy requests (battery sizing, forecasts) are bounded: issue 32, finding 5 — 16 sizings in
parallel took 1.35 GB, and a timed-out one kept burning a core."""

import asyncio
import threading

import pytest

from streams.config import Settings
from streams.web.base import HEAVY_QUEUE_FACTOR, Busy, WebContext


def context(limit: int) -> WebContext:
    return WebContext(None, None, Settings(api_heavy_requests=limit), None, None, None, None)


async def test_at_most_the_limit_runs_a_few_wait_and_the_rest_are_refused():
    ctx = context(2)
    running, most, gate = [0], [0], threading.Event()

    def work(i, cancel):
        running[0] += 1
        most[0] = max(most[0], running[0])
        gate.wait(10)
        running[0] -= 1
        return i

    n = 2 + HEAVY_QUEUE_FACTOR * 2
    tasks = [asyncio.create_task(ctx.heavy(work, i)) for i in range(n)]
    await asyncio.sleep(0.2)
    with pytest.raises(Busy, match="CNSCHED_API_HEAVY_REQUESTS"):
        await ctx.heavy(work, -1)
    gate.set()
    assert await asyncio.gather(*tasks) == list(range(n))
    assert most[0] == 2


async def test_a_request_that_goes_sets_its_work_cancelled_and_frees_its_slot():
    ctx = context(1)
    seen, started = [], threading.Event()

    def work(cancel):
        started.set()
        seen.append(cancel.wait(10))  # a step of the work, then its check
        return "done"

    t = asyncio.create_task(ctx.heavy(work))
    await asyncio.to_thread(started.wait, 5)
    t.cancel()  # the request's time limit, or its client gone
    with pytest.raises(asyncio.CancelledError):
        await t
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.05)
    assert seen == [True]  # the thread was told, and stopped waiting at once
    assert await ctx.heavy(lambda cancel: "next") == "next"  # the slot is free again


def test_battery_sizing_stops_before_computing_once_its_request_went(tmp_path):
    from sinks.duckdb_store import DuckStore
    from streams.analytics import Abandoned
    from streams.analytics.power import size_site
    from streams.web.params import smoothing_query

    store = DuckStore(tmp_path / "p.duckdb")
    rows = [dict(src="dc1", dst="", metric="power_mw", window_start=60.0 * i, window_end=60.0 * i + 60, count=6,
                 kept=6, outliers=0, lost=0, mean=40.0 + (i % 7), p50=40.0, p95=45.0, p99=46.0, min=39.0, max=47.0)
            for i in range(600)]
    store.write_windows(rows)
    store.close()
    q = smoothing_query({})
    cancel = threading.Event()
    assert size_site(tmp_path / "p.duckdb", "dc1", q, cancel)["samples"] > 0
    cancel.set()
    with pytest.raises(Abandoned):
        size_site(tmp_path / "p.duckdb", "dc1", q, cancel)


def test_a_forecast_waiting_for_its_kernels_stops_when_its_request_went():
    from types import SimpleNamespace

    from streams.analytics import Abandoned
    from streams.web.forecast import after_warm

    warmed = SimpleNamespace(done=threading.Event())
    warmed.done.set()
    cancel = threading.Event()
    assert after_warm(warmed, lambda a, b=0: a + b, 2, b=3, cancel=cancel) == 5
    cancel.set()
    with pytest.raises(Abandoned, match="before the kernels were compiled"):
        after_warm(warmed, lambda a: a, 2, cancel=cancel)


async def test_a_client_that_disconnects_cancels_its_heavy_work(tmp_path):
    # a real aiohttp server on Faust's runner as the worker sets it up (streams.app: cancel_on_disconnect)
    import socket

    import faust
    from aiohttp import web

    from streams.metrics import Counters
    from streams.runtime.faust_patches import cancel_on_disconnect

    app = faust.App("heavy-test", broker="kafka://localhost:1", datadir=str(tmp_path))
    cancel_on_disconnect(app)
    ctx = WebContext(None, Counters(), Settings(api_heavy_requests=1), None, None, None, None)
    started, told = threading.Event(), []

    def work(cancel):
        started.set()
        told.append(cancel.wait(10))  # a step of the work: the request going must cut it short
        from streams.analytics import stop_if_abandoned

        stop_if_abandoned(cancel, "its next step")
        return "done"

    async def slow(request):
        return web.Response(text=await ctx.heavy(work))

    app.web.web_app.router.add_get("/slow", slow)
    runner = app.web._runner
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await asyncio.to_thread(started.wait, 5)
        writer.close()  # the client goes before the answer
        for _ in range(100):
            if told:
                break
            await asyncio.sleep(0.05)
        assert told == [True]  # told at once, not after its 10 s
        for _ in range(100):
            if ctx.counters.get("api_work_abandoned_total"):
                break
            await asyncio.sleep(0.05)
        assert ctx.counters.get("api_work_abandoned_total") == 1
    finally:
        await runner.cleanup()
