"""Issue 27 end to end: nodes that report their free cards, as every real reporter does, take
whole-node jobs through the real broker and POST /tasks; a third job waits with its reason."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from schemas.topics import COMPUTE_NODES
from streams.kafka import ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.http import call, wait_nodes

pytestmark = pytest.mark.integration


def report(node: str, now: float) -> dict:
    return {"node": node, "ts": now, "region": "eu", "zone": "eu-dc1", "rack": "r1", "accel_class": "gpu",
            "cards": 8, "peak_tflops": {"fp16": 1000, "fp32": 100}, "mem_gb": 80, "host_mem_gb": 1024,
            "inter_bw_gbps": 400, "free": {"cards": 8, "mem_gb": 640, "host_mem_gb": 1024}}


async def test_two_full_nodes_reporting_free_cards_take_two_whole_node_jobs_and_a_third_waits(make_settings,
                                                                                              tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        p = producer(settings)
        await p.start()
        for node in ("n1", "n2"):
            r = report(node, time.time())
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=node.encode())
        await p.stop()
        await wait_nodes(port, 2)
        await asyncio.sleep(2.5)  # the reports are a few seconds old, as real ones are between refreshes
        placed = []
        for tid in ("dp1", "dp2"):
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
                "id": tid, "type": "training-data-parallel", "resources": {"cards": 8}})
            assert status == 200 and body["decision"]["status"] == "placed", body
            placed += body["nodes"]
        assert sorted(placed) == ["n1", "n2"]
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "dp3", "type": "training-data-parallel", "resources": {"cards": 8}})
        assert status == 200 and body["decision"]["status"] == "unschedulable" and body["nodes"] == []
        assert body["decision"]["rejected"] == {"n1": "insufficient_cards", "n2": "insufficient_cards"}
        status, rec = await asyncio.to_thread(call, port, "GET", "/tasks/dp3")
        assert status == 200 and rec["status"] == "queued"
        status, node = await asyncio.to_thread(call, port, "GET", "/compute/nodes/n1")
        assert status == 200 and node["first_seen"] <= node["last_seen"]
    finally:
        stop_process(worker)
