"""Issue 51, finding 2, through the real broker and API: an 8-card task limited to h100 cards, both
h100 nodes booked and an a100 node empty, waits for resources and says which node fails which check
(it said "retrying: fits now: placed at the next retry" for minutes), in GET /tasks/{id}, `cnsched
describe task` and the submission's own line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from streams.kafka import ensure_topics
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.http import call, wait_nodes
from tests.helpers.scheduling import gpu_node, send_reports

pytestmark = pytest.mark.integration
WHY = "0/3 nodes can take a worker now: 1 not of accelerator class h100 (a1); 2 fewer than 8 free cards (h1, h2)"


async def test_a_class_limited_task_waits_for_resources_naming_the_nodes(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3, node_timeout_seconds=900)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        await send_reports(settings, [gpu_node(node, time.time(), accel_class=cls)
                                      for node, cls in (("h1", "h100"), ("h2", "h100"), ("a1", "a100"))])
        await wait_nodes(port, 3)
        task = {"type": "training-data-parallel", "resources": {"cards": 8, "accel_classes": ["h100"]}}
        for tid in ("x", "y", "h"):
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {"id": tid, **task})
            assert status in (200, 202), body
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            _, rec = await asyncio.to_thread(call, port, "GET", "/tasks/h")
            if (rec.get("estimate") or {}).get("basis") == WHY:
                break
            await asyncio.sleep(0.3)
        assert rec["status"] == "queued" and rec["estimate"]["reason"] == "resources", rec.get("estimate")
        assert rec["estimate"]["basis"] == WHY
        run = subprocess.run([sys.executable, "-m", "streams.cli", "describe", "task", "h", "--url",
                              f"http://127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and f"Waiting for:  resources: {WHY}" in run.stdout.splitlines(), run.stdout
        # the decision's rejections, nodes named by reason
        assert "  Rejected: 2 insufficient_cards (h1, h2); 1 accelerator_class_not_allowed (a1)" in run.stdout.splitlines()
    finally:
        stop_process(worker)
