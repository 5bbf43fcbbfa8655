"""The network-awareness and compute endpoints against live workers."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from schemas.topics import COMPUTE_DEADLETTER, COMPUTE_NODES, NETSTATE_WINDOWS
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.broker import free_port
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.http import get

pytestmark = pytest.mark.integration


async def wait_for(port: int, path: str, status: int = 200, timeout_s: float = 60, until=None) -> dict:
    """The answer once it has ``status`` (and ``until(body)`` holds: windows are applied one by one)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = await asyncio.to_thread(get, port, path)
            if last[0] == status and (until is None or until(last[1])):
                return last[1]
        except OSError:
            pass
        await asyncio.sleep(0.3)
    raise AssertionError(f"{path}: {last}")


def window(src, dst, metric, end, **stats):
    base = dict(src=src, dst=dst, metric=metric, window_start=end - 10, window_end=end, count=100, kept=100,
                outliers=0, lost=0, mean=None, p50=None, p95=None, p99=None, min=None, max=None)
    base.update(stats)
    return base


def _data(NOW: float):  # noqa: N803 - the test's clock, read when the test starts (not at import)
    WINDOWS = [
        # a -> b: p95 90 ms, p50 85 ms (jitter 5), 1 of 100 probes lost
        window("a", "b", "rtt_ms", NOW - 5, count=100, kept=99, lost=1, mean=86.0, p50=85.0, p95=90.0, p99=95.0, min=80.0, max=96.0),
        window("a", "c", "rtt_ms", NOW - 5, mean=0.2, p50=0.2, p95=0.25, p99=0.3, min=0.1, max=0.3),
        window("a", "", "bw_util", NOW - 5, count=10, kept=10, mean=0.65, p50=0.65, p95=0.7, p99=0.7, min=0.6, max=0.7),
        window("b", "", "bw_util", NOW - 5, count=10, kept=10, mean=0.2, p50=0.2, p95=0.2, p99=0.2, min=0.2, max=0.2),
        window("a", "", "retrans_rate", NOW - 5, count=10, kept=10, mean=0.0, p50=0.0, p95=0.0, p99=0.0, min=0.0, max=0.0),
        # an older a -> b window arriving late must not replace the newer one
        window("a", "b", "rtt_ms", NOW - 15, mean=999.0, p50=999.0, p95=999.0, p99=999.0, min=999.0, max=999.0),
    ]

    REPORTS = [
        {"node": "n1", "ts": NOW, "accel_model": "H100-SXM", "cards": 8, "peak_tflops": {"fp16": 1979, "int8": 3958},
         "mem_gb": 80, "mem_bw_gbs": 3350, "host_mem_bw_gbs": 400, "intra_bw_gbps": 7200, "inter_bw_gbps": 400,
         "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0, "rack_color": "blue"},
        {"node": "n2", "ts": NOW, "accel_model": "H100-SXM", "cards": 4, "peak_tflops": {"fp16": 1979, "int8": 3958},
         "mem_gb": 80, "mem_bw_gbs": 3350, "host_mem_bw_gbs": 400, "intra_bw_gbps": 7200, "inter_bw_gbps": 400,
         "availability": 1.0, "idle_rate": 0.5, "queue_delay_s": 0},
        {"node": "n3", "ts": NOW, "status": "down", "cards": 0, "host_mem_bw_gbs": 100},
    ]
    BAD_REPORT = {"node": "n9", "ts": NOW, "inter_bw_gbps": -5, "availability": 1.5}
    return WINDOWS, REPORTS, BAD_REPORT


NOW = time.time()
WINDOWS, REPORTS, BAD_REPORT = _data(NOW)


async def test_network_and_compute_endpoints(make_settings, tmp_path):
    global NOW, WINDOWS, REPORTS, BAD_REPORT  # fresh: the suite may reach this test minutes after import
    NOW = time.time()
    WINDOWS, REPORTS, BAD_REPORT = _data(NOW)
    settings = make_settings()
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w1.log")
    second = None
    try:
        await _publish(settings)
        port = settings.web_port
        quality = await _network_answers(port)
        await _compute_answers(port)
        await _invalid_report_dead_lettered(settings)
        second = await _a_second_worker_answers_the_same(settings, tmp_path, port, quality)
    finally:
        if second is not None:
            stop_process(second)
        stop_process(worker)


async def _publish(settings) -> None:
    p = producer(settings)
    await p.start()
    for w in WINDOWS:
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(w).encode(), key=b"k")
    await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), b"not a window", key=b"k")
    for r in REPORTS + [BAD_REPORT]:
        await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
    await p.stop()


async def _network_answers(port: int) -> float:
    # the path's own windows may be applied before its endpoints' NIC windows (a CI run saw it)
    path = await wait_for(port, "/network/paths/a/b", until=lambda b: None not in b["inputs"].values())
    # worked example (see tests/core/test_quality.py): p95 90 -> 18.821; loss 1/100 -> 80;
    # bw_util max(0.65 at a, 0.2 at b) -> headroom 0.35 -> 50; retrans 0 at a -> 100; jitter 5 -> 33.333
    assert path["inputs"] == {"p95_rtt_ms": 90.0, "loss": 0.01, "bw_util": 0.65, "retrans": 0.0, "jitter_ms": 5.0}
    assert path["quality"] == pytest.approx(49.087, abs=1e-3)
    assert path["window_end"] == pytest.approx(NOW - 5) and 0 <= path["age_s"] < 120
    assert set(path["quality_by_profile"]) == {"balanced", "latency", "bandwidth", "duplex"}
    # duplex .30/.20/.30/.10/.10: 5.646 + 16 + 15 + 10 + 3.333 (this direction; the scheduler takes the worse)
    assert path["quality_by_profile"]["duplex"] == pytest.approx(49.980, abs=1e-3)

    node = await wait_for(port, "/network/nodes/a")
    good = (await wait_for(port, "/network/paths/a/c"))["quality"]
    assert node["bw_util"] == 0.65 and node["peers"] == 2 and node["worst_peer"] == "b"
    assert node["mean_quality_to_peers"] == pytest.approx((path["quality"] + good) / 2, abs=1e-4)
    assert "window_end" in node and "age_s" in node

    listing = await wait_for(port, "/network/nodes?offset=0&limit=1")
    assert listing["total"] == 2 and [i["node"] for i in listing["items"]] == ["a"]
    paths = await wait_for(port, "/network/paths?src=a")
    assert [(i["src"], i["dst"]) for i in paths["items"]] == [("a", "b"), ("a", "c")]

    assert (await asyncio.to_thread(get, port, "/network/nodes/zz"))[0] == 404
    status, body = await asyncio.to_thread(get, port, "/network/nodes/bad%20id")
    assert status == 400 and body["fields"][0]["field"] == "node"
    status, body = await asyncio.to_thread(get, port, "/network/paths?limit=0&offset=x")
    assert status == 400 and {f["field"] for f in body["fields"]} == {"limit", "offset"}

    return path["quality"]


async def _compute_answers(port: int) -> None:
    n1 = await wait_for(port, "/compute/nodes/n1")
    n2 = await wait_for(port, "/compute/nodes/n2")
    assert n1["compute_score"]["training"] == pytest.approx(100.0)
    assert n2["dimensions"]["training"]["compute"] == pytest.approx(50.0)  # half the cards
    assert n1["report"]["rack_color"] == "blue"  # unknown fields kept, not scored
    assert n1["available"] and 0 <= n1["age_s"] < 120
    n3 = await wait_for(port, "/compute/nodes/n3")
    assert n3["available"] is False
    assert (await asyncio.to_thread(get, port, "/compute/nodes/n9"))[0] == 404
    nodes = await wait_for(port, "/compute/nodes?limit=2")
    assert nodes["total"] == 3 and len(nodes["items"]) == 2



async def _invalid_report_dead_lettered(settings) -> None:
    dead = consumer(settings, COMPUTE_DEADLETTER, group_id=None)
    await dead.start()
    letters = []
    deadline = time.monotonic() + 30
    while not letters and time.monotonic() < deadline:
        for _tp, msgs in (await dead.getmany(timeout_ms=500)).items():
            letters += [json.loads(m.value) for m in msgs]
    await dead.stop()
    (letter,) = letters
    assert {e["field"] for e in letter["errors"]} == {"inter_bw_gbps", "availability"}
    assert json.loads(base64.b64decode(letter["original_b64"])) == BAD_REPORT



async def _a_second_worker_answers_the_same(settings, tmp_path, port: int, quality: float):
    # a second worker in the same group answers the same, whoever owns the state partition
    port2 = free_port()
    second = start_worker(settings.model_copy(update={"web_port": port2}), tmp_path / "w2.log")
    for port_ in (port2, port):  # after the rebalance, each answers (one of them by forwarding)
        body2 = await wait_for(port_, "/network/paths/a/b")
        assert body2["quality"] == pytest.approx(quality)
        assert (await wait_for(port_, "/compute/nodes/n1"))["compute_score"]["training"] == pytest.approx(100.0)
    return second
