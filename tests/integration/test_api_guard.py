"""The API closed by default (issue 15): the bind address, bearer tokens and their scopes, JSON bodies
only, hostile bodies, and the rate limit on POST /tasks — against a live worker."""

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from streams.kafka import ensure_topics
from streams.runtime.processes import start_worker, stop_process

pytestmark = pytest.mark.integration

WRITE, READ = "w" * 20, "r" * 20


def request(port, method, path, body=None, token=None, ctype="application/json", host="127.0.0.1", headers=None):
    headers = {**({"Content-Type": ctype} if ctype else {}), **(headers or {})}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://{host}:{port}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def wait_up(port, deadline_s=90.0):
    """Until the worker answers from its state tables (it owns their partitions) and says it is ready
    (every table recovered: the quota table's recovery may end after the network view answers)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if request(port, "GET", "/network/nodes")[0] == 200 and request(port, "GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("worker API never came up")


def cnsched_cli(port: int, token: str | None, *argv: str):
    """`cnsched ARGV --url 127.0.0.1:PORT` (no scheme) with CNSCHED_API_TOKEN = ``token``; TASK on stdin."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CNSCHED_API_TOKEN"} | (
        {"CNSCHED_API_TOKEN": token} if token else {})
    return subprocess.run([sys.executable, "-m", "streams.cli", *argv, "--url", f"127.0.0.1:{port}"],
                          input=json.dumps(TASK), capture_output=True, text=True, timeout=60, env=env)


def outside_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


TASK = {"id": "guard-1", "type": "inference", "resources": {"cards": 1}}


async def test_tokens_scopes_content_type_nesting_rate_limit_and_bind(make_settings, tmp_path):
    settings = make_settings(api_tokens={WRITE: "write", READ: "read"}, api_task_rate=1.0,
                             decision_timeout_seconds=1.0)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    body = json.dumps(TASK).encode()
    try:
        wait_up(port)
        # reads are open (CNSCHED_API_READ_NEEDS_TOKEN unset); a wrong token is refused anyway
        assert request(port, "GET", "/network/nodes")[0] == 200
        assert request(port, "GET", "/network/nodes", token="x" * 20)[0] == 401
        # state changes: no token 401, a read token 403, a write token with a text body 415
        status, headers, _ = request(port, "POST", "/tasks", body)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
        assert request(port, "POST", "/tasks", body, token=READ)[0] == 403
        assert request(port, "POST", "/tasks", body, token=WRITE, ctype="text/plain")[0] == 415
        assert request(port, "POST", "/tasks", body, token=WRITE, ctype=None)[0] == 415
        # the CLI says each refusal, with what to set, and exits non-zero (issue 51, finding 3): no token, a
        # read token, a body over 1 MiB; --url without a scheme works
        for token, want in ((None, "HTTP 401"), (READ, "HTTP 403")):
            r = cnsched_cli(port, token, "submit", "-")
            assert r.returncode == 1 and want in r.stderr and "set CNSCHED_API_TOKEN" in r.stderr, r.stderr
        big = tmp_path / "big.json"
        big.write_text(json.dumps({"quotas": [], "pad": "x" * (2 << 20)}))
        r = cnsched_cli(port, WRITE, "quotas", str(big))
        assert r.returncode == 1 and "HTTP 413" in r.stderr and "at most 1 MiB" in r.stderr, r.stderr
        # a write token and JSON: decided (200) or accepted (202); then nested JSON is a 422, not a 500
        assert request(port, "POST", "/tasks", body, token=WRITE)[0] in (200, 202)
        status, _, out = request(port, "POST", "/tasks", b"[" * 50_000 + b"]" * 50_000, token=WRITE)
        assert status == 422 and json.loads(out)["error"] == "invalid task"
        # burst of 2 per client at 1/s: spent by now, the next is 429 with Retry-After
        status, headers, out = request(port, "POST", "/tasks", b"{}", token=WRITE)
        assert status == 429 and int(headers["Retry-After"]) >= 1, out
        assert request(port, "GET", "/health")[0] == 200  # never limited, never needs a token
        # aiohttp's own refusals answer JSON too: no such path, a method the path does not take, a body over 1 MiB
        for method, path, payload, want in (("GET", "/nope", None, 404), ("PUT", "/tasks", b"{}", 405),
                                            ("POST", "/quotas", b"{}", 405),
                                            ("PUT", "/quotas", b"[" + b" " * (2 << 20) + b"]", 413)):
            status, headers, out = request(port, method, path, payload, token=WRITE)
            assert status == want and headers["Content-Type"].startswith("application/json"), (path, out[:200])
            assert set(json.loads(out)) == {"error", "detail"}, out
        _, _, metrics = request(port, "GET", "/metrics")
        assert b'cnsched_api_refused_total{status="429"} 1' in metrics
        # bound to 127.0.0.1 by default: another address of this machine is refused
        other = outside_address()
        if other is not None:
            with pytest.raises(OSError):
                request(port, "GET", "/health", host=other)
    finally:
        stop_process(worker)


def closed_within(port, seconds, trickle=b"") -> float | None:
    """Connect, send ``trickle`` one byte every 0.2 s (a request's headers, slowly), and return when the
    server closed the connection, or None if it was still open after ``seconds``."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
        i = 0
        while time.monotonic() - start < seconds:
            try:
                if i < len(trickle):
                    s.sendall(trickle[i:i + 1])
                    i += 1
                if s.recv(1024) == b"":
                    return time.monotonic() - start
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - start
    return None


async def test_slow_and_silent_clients_are_disconnected(make_settings, tmp_path):
    settings = make_settings(web_idle_timeout_seconds=2.0)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        wait_up(port)
        # a client that sends nothing, and one that sends its headers a byte at a time, never finishing
        assert (silent := closed_within(port, 10.0)) is not None and silent >= 1.5, silent
        slow = closed_within(port, 10.0, trickle=b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200)
        assert slow is not None and slow >= 1.5, slow
        # a whole request is answered, however close to the limit it comes; the connection then idles out
        assert request(port, "GET", "/health")[0] == 200
    finally:
        stop_process(worker)


async def test_without_tokens_state_changes_come_from_loopback_only(make_settings, tmp_path):
    other = outside_address()
    if other is None:
        pytest.skip("this machine has no address besides loopback")
    settings = make_settings(web_bind="0.0.0.0")
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    try:
        wait_up(settings.web_port)
        body = json.dumps({**TASK, "id": "guard-2"}).encode()
        status, _, out = request(settings.web_port, "POST", "/tasks", body, host=other)
        assert status == 403 and b"CNSCHED_API_TOKENS" in out
        assert request(settings.web_port, "GET", "/health", host=other)[0] == 200
        assert request(settings.web_port, "POST", "/tasks", body)[0] in (200, 202)
    finally:
        stop_process(worker)


async def test_a_rebound_name_cannot_change_state_through_a_browser_and_a_full_queue_refuses(make_settings, tmp_path):
    """Issue 32, finding 5: without tokens a state change from loopback was taken whatever Host and
    Origin said, so a page whose name was rebound to 127.0.0.1 could submit tasks through the
    operator's browser; and the queue had no length cap."""
    settings = make_settings(max_queued_tasks=1)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        wait_up(port)

        def post(task_id, **headers):
            status, got, raw = request(port, "POST", "/tasks", json.dumps({**TASK, "id": task_id}).encode(),
                                       headers=headers)
            return status, got, json.loads(raw)

        for headers in ({"Host": f"rebound.example:{port}"}, {"Origin": f"http://rebound.example:{port}"},
                        {"Origin": "null"}):
            status, _, body = post("guard-3", **headers)
            assert status == 403 and "DNS rebinding" in body["detail"], (headers, status, body)
        # the names a browser on this host uses for it are taken; no node: the task waits in the queue
        status, _, body = post("guard-3", Host=f"localhost:{port}", Origin=f"http://localhost:{port}")
        assert status in (200, 202) and body["status"] in ("queued", "accepted"), body
        status, headers, body = post("guard-4", Host=f"[::1]:{port}")
        assert status == 503 and body["error"] == "queue full" and "CNSCHED_MAX_QUEUED_TASKS" in body["detail"], body
        assert headers["Retry-After"] == "60"
        # refused for want of room, not for what it is: once room is made, the same task is taken
        status, _, _ = request(port, "DELETE", "/tasks/guard-3")
        assert status in (200, 202)
        status, _, body = post("guard-4")
        assert status in (200, 202) and body["status"] in ("queued", "accepted"), body
    finally:
        stop_process(worker)


async def test_named_tokens_are_who_submits_and_who_commands(make_settings, tmp_path):
    """Issue 51, finding 8: a token's name is the submitter of every task and the `by` of every
    command; a token may name another `by` only with act_for_others; a bare-scope token gets a name
    derived from it (never the token itself)."""
    import hashlib

    alice, portal = "a" * 20, "p" * 20
    settings = make_settings(api_tokens={alice: {"scope": "write", "name": "alice"}, WRITE: "write",
                                         portal: {"scope": "write", "name": "portal", "act_for_others": True}})
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        wait_up(port)

        def post(path, body, token):
            status, _, out = request(port, "POST", path, json.dumps(body).encode(), token=token)
            return status, json.loads(out)

        def record(tid):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                status, _, out = request(port, "GET", f"/tasks/{tid}")
                if status == 200:
                    return json.loads(out)
                time.sleep(0.3)
            raise AssertionError(f"{tid} never recorded")

        for tid, token, asked, want in (("t-a", alice, None, "alice"), ("t-p", portal, "carol", "carol"),
                                        ("t-w", WRITE, None, "token-" + hashlib.sha256(WRITE.encode()).hexdigest()[:8])):
            status, body = post("/tasks", {**TASK, "id": tid, **({"submitted_by": asked} if asked else {})}, token)
            assert status in (200, 202), body
            assert record(tid)["task"]["submitted_by"] == want
        status, body = post("/tasks", {**TASK, "id": "t-x", "submitted_by": "bob"}, alice)
        assert status == 403 and "act_for_others" in body["detail"], body
        status, body = post("/tasks/t-a/hold", {"by": "bob"}, alice)
        assert status == 403, body
        status, body = post("/tasks/t-a/priority", {"priority": 60}, alice)
        assert status in (200, 202), body
        deadline = time.monotonic() + 30
        while not [h for h in record("t-a")["history"] if "event" in h] and time.monotonic() < deadline:
            time.sleep(0.3)
        (ev,) = [h["event"] for h in record("t-a")["history"] if "event" in h]
        assert (ev["event"], ev["by"]) == ("priority", "alice")
    finally:
        stop_process(worker)
