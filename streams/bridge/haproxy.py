"""The route agent (issue 54): a service's routing weights (``sched.routes``) applied to a real load
balancer, HAProxy, through its runtime API (the admin socket: one command a connection).

- One backend per service and origin, named by ``backend`` (``{service}.{origin}`` by default): the
  operator's HAProxy configuration declares the backends (and the frontends that feed them: one per
  origin, e.g. one per listening address its users reach); the agent manages their servers.
- One server per replica, named by the replica's task id, at its address (the node's address and the
  service's port): added when the weights first name it (``add server``, then ``enable server``: a
  dynamic server starts in maintenance), its weight set (``set server .. weight``: HAProxy's 0..256),
  its address followed when the replica moves (``set server .. addr``).
- A replica the weights no longer name drains (``state drain``: no new requests, the open ones
  finish) and is deleted ``drain_s`` later (``state maint``, then ``del server``).

:func:`apply` works on one message; :func:`run_route_agent` consumes the topic (the newest message of
each service wins; on start it reads the topic from its beginning, so a new agent reaches the current
weights).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from dataclasses import dataclass, field

from pydantic import ValidationError

from schemas.routes import Routes
from schemas.topics import SCHED_ROUTES
from streams.config import Settings
from streams.kafka import consumer

log = logging.getLogger(__name__)


OK = {"", "New server registered.", "Server deleted."}  # what HAProxy 2.6 answers a change that worked


class HaproxyError(RuntimeError):
    """The runtime API refused a command or could not be reached; the message says which and why."""


@dataclass(frozen=True)
class Server:
    name: str
    address: str  # host:port
    weight: int
    admin: int  # srv_admin_state: 0 ready; bit 0x01 forced maintenance, 0x20 dynamic maint, 0x08 drain
    draining: bool


class RuntimeApi:
    """HAProxy's runtime API on its admin socket (``stats socket PATH level admin``)."""

    def __init__(self, path: str, timeout_s: float = 5.0) -> None:
        self.path, self.timeout_s = path, timeout_s

    def run(self, line: str) -> str:
        """One command's answer (HAProxy closes the connection after it)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout_s)
                s.connect(self.path)
                s.sendall(line.encode() + b"\n")
                chunks = []
                while chunk := s.recv(65536):
                    chunks.append(chunk)
        except OSError as exc:
            raise HaproxyError(f"haproxy runtime API at {self.path}: {exc}") from None
        return b"".join(chunks).decode(errors="replace")

    def must(self, line: str) -> str:
        """:meth:`run` of a command that changes something: HAProxy answers those with nothing or one of
        its success lines; any other answer is a refusal (HaproxyError naming the command and it)."""
        out = self.run(line)
        if out.strip() not in OK:
            raise HaproxyError(f"haproxy refused {line!r}: {out.strip()[:300]}")
        return out

    def info(self) -> str:
        """``show info`` (HaproxyError unless HAProxy answers it)."""
        out = self.run("show info")
        if not out.startswith("Name:"):
            raise HaproxyError(f"haproxy runtime API at {self.path} answered show info with {out.strip()[:200]!r}")
        return out

    def servers(self, backend: str) -> dict[str, Server]:
        """The backend's servers (``show servers state``); HaproxyError for an unknown backend."""
        out = self.run(f"show servers state {backend}")
        lines = [x for x in out.splitlines() if x.strip()]
        head = next((x for x in lines if x.startswith("# ")), None)
        if head is None:
            raise HaproxyError(f"haproxy: no backend {backend!r} ({out.strip()[:200]})")
        cols = head[2:].split()
        out_ = {}
        for line in lines:  # the first line is the format's version; a server's line has every column
            if line.startswith("#") or len(line.split()) < len(cols):
                continue
            v = dict(zip(cols, line.split(), strict=False))
            if v.get("be_name") != backend:
                continue
            admin = int(v.get("srv_admin_state", "0"))
            out_[v["srv_name"]] = Server(v["srv_name"], f"{v['srv_addr']}:{v.get('srv_port', '0')}",
                                         int(v.get("srv_uweight", "0")), admin, bool(admin & 0x08))
        return out_


@dataclass
class Applier:
    """Applies routes messages to one HAProxy (see the module); remembers when each server it stopped
    naming began to drain."""

    api: RuntimeApi
    backend: str = "{service}.{origin}"
    drain_s: float = 30.0
    draining: dict[tuple[str, str], float] = field(default_factory=dict)  # (backend, server) -> since
    last: dict[str, Routes] = field(default_factory=dict)  # each service's newest routes applied

    def tick(self, now: float | None = None) -> list[str]:
        """The newest routes again for services with servers draining: those drained long enough go."""
        out = []
        for r in list(self.last.values()):
            if any(b == self.backend.format(service=r.service_id, origin=o.origin)
                   for (b, _) in self.draining for o in r.origins):
                out += self.apply(r, now)
        return out

    def apply(self, routes: Routes, now: float | None = None) -> list[str]:
        """Every origin's backend brought to the message's weights; returns the commands sent.
        A backend the configuration lacks raises HaproxyError (the others are applied first)."""
        now = time.time() if now is None else now
        self.last[routes.service_id] = routes
        sent, missing = [], []
        for o in routes.origins:
            b = self.backend.format(service=routes.service_id, origin=o.origin)
            try:
                current = self.api.servers(b)
            except HaproxyError:
                missing.append(b)
                continue
            want = {r.replica: r for r in o.replicas if r.address}
            for name, r in want.items():
                sent += self._one(b, name, r.address, r.weight, current.get(name))
                self.draining.pop((b, name), None)
            for name, s in current.items():
                if name in want:
                    continue
                since = self.draining.setdefault((b, name), now)
                if not s.draining and not s.admin & 0x21:
                    lines = [f"set server {b}/{name} state drain"]
                elif now - since >= self.drain_s:
                    lines = [f"set server {b}/{name} state maint", f"del server {b}/{name}"]
                    self.draining.pop((b, name), None)
                else:
                    continue
                for line in lines:
                    self.api.must(line)
                sent += lines
        if missing:
            raise HaproxyError(f"haproxy has no backend {', '.join(missing)} (declare one per service and origin: "
                               f"{self.backend})")
        return sent

    def _one(self, b: str, name: str, address: str, weight: int, s: Server | None) -> list[str]:
        host, _, port = address.rpartition(":")
        lines = []
        if s is None:
            lines += [f"add server {b}/{name} {address} weight {weight}", f"enable server {b}/{name}"]
        else:
            if s.address != address:
                lines.append(f"set server {b}/{name} addr {host} port {port}")
            if s.weight != weight:
                lines.append(f"set server {b}/{name} weight {weight}")
            if s.admin:  # drained or in maintenance before: it serves again
                lines.append(f"set server {b}/{name} state ready")
        for line in lines:
            self.api.must(line)
        return lines


async def run_route_agent(settings: Settings, applier: Applier, stop: asyncio.Event,
                          services: set[str] | None = None) -> None:
    """Consume sched.routes from the beginning and apply each service's newest message (only
    ``services`` when given); a message that breaks the contract or a refusal is logged, never fatal."""
    c = consumer(settings, SCHED_ROUTES, group_id=None, auto_offset_reset="earliest")  # every agent reads all
    await c.start()
    try:
        while not stop.is_set():
            batch = await c.getmany(timeout_ms=500)
            newest: dict[str, Routes] = {}
            for msgs in batch.values():
                for m in msgs:
                    try:
                        r = Routes.model_validate(json.loads(m.value))
                    except (ValidationError, ValueError, TypeError) as exc:
                        log.warning("route agent: a sched.routes message that breaks its contract: %s", exc)
                        continue
                    if services is None or r.service_id in services:
                        newest[r.service_id] = r
            for r in newest.values():
                try:
                    sent = await asyncio.to_thread(applier.apply, r)
                    log.info("route agent: %s v%d applied (%d commands)", r.service_id, r.version, len(sent))
                except HaproxyError as exc:
                    log.error("route agent: %s v%d: %s", r.service_id, r.version, exc)
            try:
                await asyncio.to_thread(applier.tick)  # drained servers deleted in time, messages or not
            except HaproxyError as exc:
                log.error("route agent: %s", exc)
    finally:
        await c.stop()
