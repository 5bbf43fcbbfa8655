"""Requests routed by a real load balancer (issue 54): a live worker computes a service's routing weights
from the measured paths of its users' origins, publishes them on sched.routes and answers them at
GET /services/{id}/routes; `cnsched route-agent` applies them to a real HAProxy through its runtime API;
real HTTP requests through HAProxy's frontends reach each replica in the share the weights say. A
degraded path and a replica that reports itself slow lose their share; a replica the service no longer
names drains and is deleted. Debian's haproxy (`make test` installs it); without it the test skips,
saying so."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.routing import split
from schemas.topics import COMPUTE_NODES, NETSTATE_WINDOWS, SCHED_EVENTS, SCHED_ROUTES
from streams.bridge.haproxy import Applier, RuntimeApi
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_command, start_worker, stop_process
from tests.helpers.http import call
from tests.integration.test_scheduling_api import report, rtt_window
from tests.integration.test_services import wait_for_nodes

pytestmark = pytest.mark.integration
HAPROXY = os.environ.get("CNSCHED_HAPROXY") or shutil.which("haproxy") or "/usr/sbin/haproxy"
if not os.path.exists(HAPROXY) and os.geteuid() != 0:  # as root `make test` installs it: missing is a failure
    pytest.skip(f"no haproxy at {HAPROXY}, and not root: `make test` cannot install Debian's haproxy here "
                "(install it, or set CNSCHED_HAPROXY)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """A replica's HTTP server on a loopback address: answers every request with its name."""

    def __init__(self, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        class H(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer((host, port), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def start_haproxy(tmp_path, frontends: dict[str, int]):
    cfg = tmp_path / "haproxy.cfg"
    parts = [f"global\n    stats socket {tmp_path}/admin.sock mode 600 level admin\n",
             "defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n"]
    for origin, port in frontends.items():
        parts.append(f"frontend {origin}\n    bind 127.0.0.1:{port}\n    default_backend chat.{origin}\n"
                     f"backend chat.{origin}\n    balance roundrobin\n")
    cfg.write_text("\n".join(parts))
    subprocess.run([HAPROXY, "-f", str(cfg), "-D", "-p", str(tmp_path / "haproxy.pid")], check=True)
    return tmp_path / "admin.sock", tmp_path / "haproxy.pid"


def through(port: int, n: int) -> Counter:
    """Which replica answered each of ``n`` requests through a frontend."""
    got = Counter()
    for _ in range(n):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            got[r.read().decode()] += 1
    return got


async def wait_routes(out, pred, timeout: float = 45.0) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for msgs in (await out.getmany(timeout_ms=300)).values():
            for m in msgs:
                last = json.loads(m.value)
                if pred(last):
                    return last
    raise AssertionError(f"no such routes on sched.routes; the last: {last}")


async def wait_weights(api: RuntimeApi, backend: str, want: dict[str, int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        have = {n: s.weight for n, s in api.servers(backend).items() if s.weight and not s.draining and not s.admin}
        if have == want:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{backend}: {api.servers(backend)} is not {want}")


def shares(routes: dict, origin: str) -> dict[str, float]:
    o = next(x for x in routes["origins"] if x["origin"] == origin)
    return {r["replica"]: r["share"] for r in o["replicas"]}


def weights_of(routes: dict, origin: str) -> dict[str, int]:
    o = next(x for x in routes["origins"] if x["origin"] == origin)
    return {r["replica"]: r["weight"] for r in o["replicas"] if r["weight"] > 0}


async def test_a_worker_s_weights_reach_haproxy_and_requests_follow_them(make_settings, tmp_path):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    # each node's replica serves on the service's port at the node's own address (two loopback addresses)
    a = Replica("A", "127.0.0.2")
    b = Replica("B", "127.0.0.3", a.port)
    eu, us = free_port(), free_port()
    sock, pid = start_haproxy(tmp_path, {"eu": eu, "us": us})
    worker = start_worker(settings, tmp_path / "w.log")
    agent = None
    now = time.time()
    try:
        p = producer(settings)
        await p.start()
        # two one-card nodes: a replica each (spread), reached at the addresses the nodes report
        for node, host in (("A", "127.0.0.2"), ("B", "127.0.0.3")):
            r = {**report(node, 1, 1000, now), "address": host}
            await p.send_and_wait(settings.topic(COMPUTE_NODES), json.dumps(r).encode(), key=node.encode())
        # eu's users are 2 ms from A and 40 from B; us's the other way round
        for src, dst, ms in (("users.eu", "A", 2.0), ("users.eu", "B", 40.0), ("users.us", "A", 40.0),
                             ("users.us", "B", 2.0)):
            await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(rtt_window(src, dst, now, ms * 0.9, ms)).encode(),
                                  key=b"k")
        await wait_for_nodes(settings.web_port, 2, "/network/paths/users.us/B")
        out = consumer(settings, SCHED_ROUTES, group_id=None)
        await out.start()
        # the service: a replica per node, its users 70 % in eu and 30 % in us; replicas of 10 requests/s
        service = {"id": "chat", "type": "inference", "resources": {"cards": 1},
                   "scaling": {"min_replicas": 2, "max_replicas": 2, "prescale_lead_s": 0, "replica_rate": 10.0,
                               "port": a.port, "origins": [{"name": "eu", "endpoint": "users.eu", "share": 0.7},
                                                         {"name": "us", "endpoint": "users.us", "share": 0.3}]}}
        bad = {**service, "id": "bad", "scaling": {**service["scaling"], "origins": [
            {"name": "eu", "endpoint": "users.eu", "share": 0.7}, {"name": "us", "endpoint": "users.us", "share": 0.2}]}}
        status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", bad)
        assert status == 422 and body["fields"][0]["field"] == "scaling", body
        assert "origins: the shares sum to 0.9, not 1" in body["fields"][0]["reason"]
        far = {**service, "id": "far", "scaling": {**service["scaling"], "origins": [
            {"name": "eu", "endpoint": "users.eu", "share": 0.5}, {"name": "apac", "endpoint": "users.apac", "share": 0.5}]}}
        status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", far)
        assert status == 409 and body["fields"][0]["field"] == "scaling.origins[1].endpoint", body
        assert "no probe measures a path from 'users.apac'" in body["fields"][0]["reason"]
        status, body = await asyncio.to_thread(call, settings.web_port, "POST", "/tasks", service)
        assert status == 200, body
        on = {}
        for rid in ("chat.r0", "chat.r1"):
            _, rec = await asyncio.to_thread(call, settings.web_port, "GET", f"/tasks/{rid}")
            on[rid] = rec["nodes"][0]
        # both replicas start (their models loaded), and the service reports 8 requests/s
        for rid, node in on.items():
            ev = {"task_id": rid, "event": "started", "at": now + 1, "nodes": [node]}
            await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(ev).encode(), key=rid.encode())
        load = {"task_id": "chat", "event": "load", "at": now + 2, "utilisation": 0.4, "request_rate": 8.0}
        await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(load).encode(), key=b"chat")
        routes = await wait_routes(out, lambda r: r["rate_known"] and all(
            x["warm"] for o in r["origins"] for x in o["replicas"]))
        ref = split([[0.002, 0.040], [0.040, 0.002]], [5.6, 2.4], [10.0, 10.0], [True, True])
        near = {"eu": next(r for r, n in on.items() if n == "A"), "us": next(r for r, n in on.items() if n == "B")}
        assert shares(routes, "eu")[near["eu"]] == pytest.approx(ref.x[0, 0] / 5.6, abs=1e-4)
        assert shares(routes, "us")[near["us"]] == pytest.approx(ref.x[1, 1] / 2.4, abs=1e-4)
        status, api_routes = await asyncio.to_thread(call, settings.web_port, "GET", "/services/chat/routes")
        assert status == 200 and api_routes["version"] == routes["version"]
        assert weights_of(api_routes, "eu") == weights_of(routes, "eu")
        status, body = await asyncio.to_thread(call, settings.web_port, "GET", "/services/nope/routes")
        assert status == 404 and body["error"] == "unknown service"

        agent = start_command(settings, tmp_path / "agent.log", "route-agent", "--socket", str(sock),
                              "--drain-seconds", "1")
        api = RuntimeApi(str(sock))
        await wait_weights(api, "chat.eu", weights_of(routes, "eu"))
        hosts = {"A": "127.0.0.2", "B": "127.0.0.3"}
        for o in ("eu", "us"):  # each server at its node's address and the service's port
            assert {n: s.address for n, s in api.servers(f"chat.{o}").items()} == \
                {r: f"{hosts[node]}:{a.port}" for r, node in on.items()}
        got = await asyncio.to_thread(through, eu, 200)
        assert got["A"] / 200 == pytest.approx(shares(routes, "eu")[near["eu"]], abs=0.03)
        got = await asyncio.to_thread(through, us, 200)
        assert got["B"] / 200 == pytest.approx(shares(routes, "us")[near["us"]], abs=0.03)

        # us's path to B degrades to 500 ms: A (40 ms) takes us's requests now
        w = rtt_window("users.us", "B", time.time(), 450.0, 500.0)
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(w).encode(), key=b"k")
        routes = await wait_routes(out, lambda r: shares(r, "us")[near["us"]] < 0.5)
        await wait_weights(api, "chat.us", weights_of(routes, "us"))
        got = await asyncio.to_thread(through, us, 200)
        assert got["A"] > got["B"]

        # B's replica reports itself slow (2.5 requests/s at full load): eu sends it less than before
        before = shares(routes, "eu")[near["us"]]
        slow = {"task_id": near["us"], "event": "load", "at": time.time(), "utilisation": 0.9, "request_rate": 2.25}
        await p.send_and_wait(settings.topic(SCHED_EVENTS), json.dumps(slow).encode(), key=near["us"].encode())
        routes = await wait_routes(out, lambda r: shares(r, "eu")[near["us"]] < before - 0.01)
        await p.stop()
        await out.stop()
        await wait_weights(api, "chat.eu", weights_of(routes, "eu"))
    finally:
        if agent is not None:
            stop_process(agent)
        stop_process(worker)
        os.kill(int(pid.read_text().split()[0]), 15)
        for r in (a, b):
            r.server.shutdown()


def test_a_replica_the_weights_stop_naming_drains_then_goes(tmp_path):
    """The applier alone against a real HAProxy: add, weigh, drain, delete; a missing backend is an error."""
    from schemas.routes import Routes
    from streams.bridge.haproxy import HaproxyError

    a, b = Replica("A"), Replica("B")
    eu = free_port()
    sock, pid = start_haproxy(tmp_path, {"eu": eu})
    try:
        api = RuntimeApi(str(sock))
        applier = Applier(api, drain_s=5.0)

        def routes(version, reps):
            return Routes.model_validate({
                "service_id": "chat", "computed_at": 1.0, "trigger": "load", "version": version, "request_rate": 1.0,
                "capacity_per_replica": 1.0, "rate_known": True, "overloaded": False, "compute_ms": 0.1,
                "origins": [{"origin": "eu", "endpoint": "users.eu", "request_rate": 1.0, "replicas": [
                    {"replica": n, "node": n, "address": f"127.0.0.1:{port}", "weight": w, "share": w / 256,
                     "warm": True} for n, port, w in reps]}]})

        sent = applier.apply(routes(0, [("r0", a.port, 192), ("r1", b.port, 64)]), now=100.0)
        assert sent[:2] == [f"add server chat.eu/r0 127.0.0.1:{a.port} weight 192", "enable server chat.eu/r0"]
        got = through(eu, 100)
        assert (got["A"], got["B"]) == (75, 25)  # weighted round robin: 192:64 exactly
        assert applier.apply(routes(1, [("r0", a.port, 192), ("r1", b.port, 64)]), now=101.0) == []  # nothing new
        sent = applier.apply(routes(2, [("r0", a.port, 256)]), now=102.0)
        assert sent == ["set server chat.eu/r0 weight 256", "set server chat.eu/r1 state drain"]
        assert through(eu, 20) == Counter({"A": 20})  # the drained one takes no new requests
        assert applier.tick(now=104.0) == []  # draining for 2 s of 5
        assert applier.tick(now=107.5) == ["set server chat.eu/r1 state maint", "del server chat.eu/r1"]
        assert set(api.servers("chat.eu")) == {"r0"}
        applier.backend = "{service}-{origin}"
        with pytest.raises(HaproxyError, match="no backend chat-eu"):
            applier.apply(routes(3, [("r0", a.port, 256)]))
    finally:
        os.kill(int(pid.read_text().split()[0]), 15)
        for r in (a, b):
            r.server.shutdown()
