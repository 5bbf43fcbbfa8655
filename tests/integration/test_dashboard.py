"""The dashboard (GET /ui) in a real browser: Debian's Chromium driven by Playwright, against a live
worker on the embedded broker. No console errors; a path degraded during the test turns bad on the
heatmap and its stored history shows with the forecast band; a submitted task shows with its score
breakdown. The screenshot is kept in test-artifacts/."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from schemas.topics import COMPUTE_NODES, NETSTATE_WINDOWS, SCHED_EVENTS
from sinks.duckdb_store import DuckStore
from streams.kafka import ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.history import windows
from tests.helpers.http import call

pytestmark = pytest.mark.integration

CHROMIUM = os.environ.get("CNSCHED_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("CNSCHED_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))
# Chromium notes every answer >= 400 as a console error; the API's answers are checked by status instead:
# 4xx are answers (409 "not enough history"), so is 503 (not ready while partitions rebalance; history
# unavailable with no DuckDB file, as here without a sink); any other 5xx is a fault
ANSWER_NOTE = re.compile(r"^Failed to load resource: the server responded with a status of \d+")


def report(node: str, now: float, zone: str) -> dict:
    return {"node": node, "ts": now, "region": "eu", "zone": zone, "accel_class": "gpu", "cards": 8,
            "peak_tflops": {"fp16": 1000, "int8": 2000, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
            "inter_bw_gbps": 400, "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0}


def rtt(src: str, dst: str, end: float, p95: float, lost: int = 0) -> dict:
    return dict(src=src, dst=dst, metric="rtt_ms", window_start=end - 10, window_end=end, count=100,
                kept=100 - lost, outliers=0, lost=lost, mean=p95 * 0.9, p50=p95 * 0.9, p95=p95, p99=p95,
                min=p95 * 0.8, max=p95)


async def send(settings, topic: str, docs: list[dict]) -> None:
    p = producer(settings)
    await p.start()
    try:
        for d in docs:
            await p.send_and_wait(settings.topic(topic), json.dumps(d).encode(), key=d.get("node", "k").encode())
    finally:
        await p.stop()


async def wait_ready(port: int, deadline_s: float = 90.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if (await asyncio.to_thread(call, port, "GET", "/health"))[0] == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.3)
    raise AssertionError("the worker never became ready")


async def launch(pw):
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: `make test` installs Debian's chromium (apt-get install chromium)")
    return await pw.chromium.launch(executable_path=CHROMIUM, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


async def test_dashboard_in_a_browser(make_settings, tmp_path):
    from playwright.async_api import async_playwright

    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    with DuckStore(settings.duckdb_path) as store:  # A -> B's history, for its chart and forecast band
        store.write_windows(windows("A", "B", 2))
    worker = start_worker(settings, tmp_path / "w.log")
    base = f"http://127.0.0.1:{settings.web_port}"
    now = time.time()
    try:
        await wait_ready(settings.web_port)
        await send(settings, COMPUTE_NODES, [report("A", now, "dc1"), report("B", now, "dc1"), report("C", now, "dc2")])
        await send(settings, NETSTATE_WINDOWS, [rtt(s, d, now, 1.0) for s, d in
                                                (("A", "B"), ("B", "A"), ("A", "C"), ("C", "A"), ("B", "C"))])
        async with async_playwright() as pw:
            browser = await launch(pw)
            page = await browser.new_page(viewport={"width": 1400, "height": 1600})
            problems: list[str] = []
            page.on("console", lambda m: m.type == "error" and not ANSWER_NOTE.match(m.text)
                    and problems.append(m.text))
            page.on("response", lambda r: r.status >= 500 and r.status != 503
                    and problems.append(f"{r.status} from {r.url}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            await page.goto(f"{base}/ui#src=A&dst=B")
            cell = page.locator('table.heat td[data-src="A"][data-dst="B"]')
            await cell.wait_for(timeout=90_000)
            assert float(await cell.get_attribute("data-quality")) > 80
            healthy = await cell.evaluate("e => getComputedStyle(e).backgroundColor")

            # A -> B degrades: 250 ms p95, 5 % lost; the page's next refresh shows it
            await send(settings, NETSTATE_WINDOWS, [rtt("A", "B", now + 10, 250.0, lost=5)])
            await page.wait_for_function(
                """() => { const c = document.querySelector('table.heat td[data-src="A"][data-dst="B"]');
                           return c && parseFloat(c.dataset.quality) < 50; }""", timeout=30_000)
            assert await cell.evaluate("e => getComputedStyle(e).backgroundColor") != healthy
            assert "250" in await cell.get_attribute("title")
            # its history (two stored days) and forecast: a line, a dashed forecast and its band
            await page.locator("#history svg path.band").wait_for(timeout=30_000)
            for part in ("history", "forecast", "band"):
                assert len(await page.locator(f"#history svg path.{part}").get_attribute("d")) > 50, part
            assert await page.locator("#history svg text").count() >= 5  # the y ticks are labelled

            # a submitted task shows with its status, node and breakdown
            task = {"id": "ui-1", "type": "inference", "resources": {"cards": 1}}
            status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", task)
            assert status == 200 and body["status"] == "placed", body
            row = page.locator('tr[data-task="ui-1"]')
            await row.wait_for(timeout=30_000)
            cells = await row.locator("td").all_inner_texts()
            assert cells[0] == "ui-1" and cells[3] == "placed" and cells[4] == body["nodes"][0]
            chosen = next(c for c in body["decision"]["candidates"] if c["node"] == body["nodes"][0])
            scores = re.fullmatch(r"([\d.]+) \((\d+)/(\d+)/[^/]+/[^/]+\)", cells[5])  # composite (compute/network/...)
            assert scores is not None, cells[5]
            assert [float(x) for x in scores.groups()] == pytest.approx(
                [chosen["composite"], chosen["compute_score"], chosen["network_score"]], abs=0.51)
            # totals from the server (GET /summary), the queue by team and class, the table within 1400 px
            await page.wait_for_function("() => document.querySelector('#summary').textContent.includes('1 placed')",
                                         timeout=30_000)
            assert "3 of 3 nodes up" in await page.locator("#summary").inner_text()
            assert (await page.locator("#queues td").all_inner_texts())[:2] == ["default", "gpu"]
            right = await page.evaluate("() => document.querySelector('#tasks table').getBoundingClientRect().right")
            assert right <= 1400, right
            status, summary = await asyncio.to_thread(call, settings.web_port, "GET", "/summary")
            assert status == 200 and summary["tasks"] == {"placed": 1} and summary["nodes"] == {"up": 3}
            assert (summary["cards_up"], summary["cards_booked"]) == (24, 1)
            assert "ui-1" in await page.locator("#events").inner_text()
            # what the page read, through the test client: each answer checked against /openapi.json
            status, page_of = await asyncio.to_thread(call, settings.web_port, "GET", "/tasks?limit=5")
            assert status == 200 and [r["task"]["id"] for r in page_of["items"]] == ["ui-1"]  # before the service
            assert (await asyncio.to_thread(call, settings.web_port, "GET", "/tasks?status=done"))[0] == 400
            assert await asyncio.to_thread(call, settings.web_port, "GET", "/incidents") == (200, {"open": []})
            # booked beside reported: the node's row counts the card cnsched booked (its report says nothing free)
            node = body["nodes"][0]
            await page.wait_for_function(
                f"""() => {{ const r = document.querySelector('tr[data-node="{node}"]');
                            return r && r.children[4].textContent === "1"; }}""", timeout=30_000)
            site = await page.locator(f'tr[data-node="{node}"] td').all_inner_texts()
            assert site[3:8] == ["8", "1", "–", "7", "up"], site
            # cancelled from the dashboard: it shows as cancelled, its card free again once its runner says
            # it stopped
            await page.locator('tr[data-task="ui-1"] button[data-action="cancel"]').click()
            await page.get_by_text("cancel ui-1: cancelled").wait_for(timeout=30_000)
            _, rec = await asyncio.to_thread(call, settings.web_port, "GET", "/tasks/ui-1")
            assert rec["status"] == "cancelled" and rec["history"][-1]["event"]["by"] == "dashboard", rec
            await page.wait_for_function(
                """() => { const r = document.querySelector('tr[data-task="ui-1"]');
                           return r && r.children[3].textContent === "cancelled"; }""", timeout=30_000)
            await send(settings, SCHED_EVENTS, [{"task_id": "ui-1", "event": "stopped", "at": time.time()}])
            await page.wait_for_function(
                f"""() => {{ const r = document.querySelector('tr[data-node="{node}"]');
                            return r && r.children[4].textContent === "0"; }}""", timeout=30_000)
            # a filter: only the cancelled tasks; a cordoned node counted apart in the header, with its reason
            await page.select_option("#task-status", "cancelled")
            await page.wait_for_function("() => document.querySelector('#tasks-count').textContent === '(1 of 1 shown)'",
                                         timeout=30_000)
            status, _ = await asyncio.to_thread(call, settings.web_port, "POST", "/nodes/C/cordon", {"reason": "fan"})
            assert status == 200
            await page.wait_for_function(
                "() => document.querySelector('#summary').textContent.includes('2 of 3 nodes up, 1 cordoned')",
                timeout=30_000)
            assert "fan" in await page.locator('tr[data-node="C"]').inner_text()
            await page.select_option("#task-status", "")
            # an elastic service's scaled decision reads as its replica count and reason
            svc = {"id": "ui-svc", "type": "inference", "resources": {"cards": 1},
                   "scaling": {"min_replicas": 2, "max_replicas": 3, "prescale_lead_s": 0}}
            status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", svc)
            assert status == 200 and body["decision"]["status"] == "scaled", body
            await page.get_by_text("ui-svc 0 → 2 replicas (created)").wait_for(timeout=30_000)
            status, doc = await asyncio.to_thread(call, settings.web_port, "GET", "/openapi.json")
            assert status == 200 and "/ui" in doc["paths"]

            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            await browser.close()
        assert not problems, problems
    finally:
        stop_process(worker)
