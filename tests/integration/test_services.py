"""An elastic inference service end to end against a live worker: POST /tasks creates its replicas
(each a decision of its own on sched.decisions), a load report on sched.events scales it (a `scaled`
decision, the warm standby promoted), and its record shows the replicas; a bad scaling spec is a 422."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from schemas.topics import COMPUTE_NODES, NETSTATE_WINDOWS, SCHED_DECISIONS, SCHED_EVENTS
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_worker, stop_process
from tests.helpers.http import call
from tests.integration.test_scheduling_api import report, rtt_window

pytestmark = pytest.mark.integration

SERVICE = {"id": "chat", "type": "inference", "resources": {"cards": 2},
           "model_repo": {"node": "store", "size_gb": 14}, "image": {"node": "store", "size_gb": 6},
           "scaling": {"min_replicas": 1, "max_replicas": 4, "standby": 1, "target_utilisation": 0.6,
                       "prescale_lead_s": 0}}


async def test_a_service_is_created_and_scaled_from_its_load(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    now = time.time()
    try:
        p = producer(settings)
        await p.start()
        for r in (report("A", 8, 2000, now), report("B", 8, 1000, now)):
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=r["node"].encode())
        for w in (rtt_window("A", "store", now, 0.9, 1.0), rtt_window("B", "store", now, 0.9, 1.0)):
            await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(w).encode(), key=b"k")
        await wait_for_nodes(port, 2, "/network/paths/B/store")

        bad = {**SERVICE, "id": "bad", "scaling": {"min_replicas": 3, "max_replicas": 2}}
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", bad)
        assert status == 422 and body["fields"][0]["field"] == "scaling", body
        assert "max_replicas (2) is below min_replicas (3)" in body["fields"][0]["reason"]
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {**SERVICE, "id": "gang", "peers": 2})
        assert status == 422 and "peers must be 1" in body["fields"][0]["reason"], body

        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", SERVICE)
        assert status == 200, body
        d = body["decision"]
        assert d["status"] == "scaled" and d["scaling"]["reason"] == "created"
        assert d["scaling"]["replicas"] == ["chat.r0"] and d["scaling"]["standby"] == ["chat.r1"]
        assert len(d["nodes"]) == 1

        out = consumer(settings, SCHED_DECISIONS, group_id=None)
        await out.start()
        # 1 serving at 95 %: ceil(0.95 / 0.6) = 2: the standby serves, a new standby (r2) is placed
        load = {"task_id": "chat", "event": "load", "at": now + 5, "utilisation": 0.95, "request_rate": 120.0}
        await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(load).encode(), key=b"chat")
        seen = await _decisions(out, lambda ds: any(x.get("scaling") and x["scaling"]["reason"] == "utilisation"
                                                    for x in ds))
        await out.stop()
        await p.stop()
        scaled = next(x for x in seen if x.get("scaling") and x["scaling"]["reason"] == "utilisation")
        c = scaled["scaling"]
        assert (c["from_replicas"], c["to_replicas"], c["promoted"], c["added"]) == (1, 2, ["chat.r1"], ["chat.r2"])
        assert c["utilisation"] == 0.95 and c["request_rate"] == 120.0
        placed = {x["task_id"] for x in seen if x["status"] == "placed"}
        assert {"chat.r0", "chat.r1", "chat.r2"} <= placed  # every replica has a decision of its own

        _, rec = await asyncio.to_thread(call, port, "GET", "/tasks/chat")
        assert rec["status"] == "placed" and rec["service"]["replicas"] == ["chat.r0", "chat.r1"]
        assert rec["service"]["standby"] == ["chat.r2"] and len(rec["nodes"]) == 2
        _, r2 = await asyncio.to_thread(call, port, "GET", "/tasks/chat.r2")
        assert r2["status"] == "placed" and r2["task"]["scaling"] is None

        # a service of none yet (minimum 0, no standby) is answered all the same
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            **SERVICE, "id": "idle", "scaling": {"min_replicas": 0, "max_replicas": 2, "prescale_lead_s": 0}})
        assert status == 200 and body["decision"]["scaling"]["to_replicas"] == 0, body

        # the service ends: every replica stops (a last scaled decision says which) and their records end
        out = consumer(settings, SCHED_DECISIONS, group_id=None)
        await out.start()
        p = producer(settings)
        await p.start()
        done = {"task_id": "chat", "event": "finished", "at": now + 30}
        await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(done).encode(), key=b"chat")
        await p.stop()
        seen = await _decisions(out, lambda ds: any((x.get("scaling") or {}).get("reason") == "ended" for x in ds))
        await out.stop()
        ended = next(x for x in seen if (x.get("scaling") or {}).get("reason") == "ended")["scaling"]
        assert ended["to_replicas"] == 0 and sorted(ended["removed"]) == ["chat.r0", "chat.r1", "chat.r2"]
        _, rec = await asyncio.to_thread(call, port, "GET", "/tasks/chat")
        _, r0 = await asyncio.to_thread(call, port, "GET", "/tasks/chat.r0")
        assert rec["status"] == "finished" and r0["status"] == "finished"
    finally:
        stop_process(worker)


async def wait_for_nodes(port: int, n: int, path: str) -> None:
    """Until the worker's API shows ``n`` nodes and the network path ``path`` (its GET)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            s, body = await asyncio.to_thread(call, port, "GET", "/compute/nodes")
            s2, _ = await asyncio.to_thread(call, port, "GET", path)
            if s == 200 and body["total"] == n and s2 == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.3)
    raise AssertionError(f"the worker did not see {n} nodes and {path}")


async def _decisions(out, done, timeout: float = 30.0) -> list[dict]:
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        for msgs in (await out.getmany(timeout_ms=500)).values():
            seen += [json.loads(m.value) for m in msgs]
    return seen
