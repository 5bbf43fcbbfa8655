"""`cnsched probe`: a real probe agent for Linux.

- Active probing, Pingmesh style: every agent answers UDP echo probes and probes each of its peers
  at ``rate_hz`` (up to 1 kHz). A reply gives an ``rtt_ms`` sample; a probe unanswered after
  ``timeout_s`` gives an ``rtt_ms`` sample with value null (lost). An unreachable peer is reported as
  loss; the agent keeps running.
- NIC utilisation from /proc/net/dev (bytes per second over the link speed from
  /sys/class/net/<if>/speed, or the configured speed), as ``bw_util`` (dst empty).
- TCP retransmission rate from /proc/net/snmp (RetransSegs / OutSegs per interval), as
  ``retrans_rate`` (dst empty).
Everything goes out through the producer SDK (Arrow batches keyed by this node).

Wire format of a probe (UDP): b"CNSP" | kind u8 (1 probe, 2 echo) | seq u64 | sent_ns u64 |
sender id (u8 length + utf-8) | on echoes, the responder's id (u8 length + utf-8).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MAGIC = b"CNSP"
PROBE, ECHO = 1, 2
_HEAD = struct.Struct("<4sBQQ")


def encode_probe(kind: int, seq: int, sent_ns: int, sender: str, responder: str = "") -> bytes:
    s, r = sender.encode(), responder.encode()
    tail = bytes([len(s)]) + s + (bytes([len(r)]) + r if kind == ECHO else b"")
    return _HEAD.pack(MAGIC, kind, seq, sent_ns) + tail


def decode_probe(data: bytes) -> tuple[int, int, int, str, str] | None:
    """(kind, seq, sent_ns, sender, responder) or None for anything that is not our probe."""
    if len(data) < _HEAD.size + 1 or not data.startswith(MAGIC):
        return None
    try:
        magic, kind, seq, sent_ns = _HEAD.unpack_from(data)
        pos = _HEAD.size
        n = data[pos]
        sender = data[pos + 1:pos + 1 + n].decode()
        pos += 1 + n
        responder = ""
        if kind == ECHO and pos < len(data):
            m = data[pos]
            responder = data[pos + 1:pos + 1 + m].decode()
        if kind not in (PROBE, ECHO):
            return None
        return kind, seq, sent_ns, sender, responder
    except (struct.error, IndexError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------------------- /proc parsing


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """Interface -> (rx_bytes, tx_bytes) from the text of /proc/net/dev."""
    out = {}
    for line in text.splitlines()[2:]:
        if ":" not in line:
            continue
        name, rest = line.split(":", 1)
        cols = rest.split()
        if len(cols) >= 9:
            out[name.strip()] = (int(cols[0]), int(cols[8]))
    return out


def parse_tcp_snmp(text: str) -> tuple[int, int]:
    """(OutSegs, RetransSegs) from the text of /proc/net/snmp."""
    tcp = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
    if len(tcp) < 2:
        raise ValueError("no Tcp lines in /proc/net/snmp")
    row = dict(zip(tcp[0][1:], tcp[1][1:], strict=False))
    return int(row["OutSegs"]), int(row["RetransSegs"])


def link_speed_bps(iface: str, configured_gbps: float | None, sys_root: Path = Path("/sys/class/net")) -> float | None:
    if configured_gbps:
        return configured_gbps * 1e9
    try:
        mbps = int((sys_root / iface / "speed").read_text().strip())
    except (OSError, ValueError):
        return None
    return mbps * 1e6 if mbps > 0 else None


def utilisation(prev: tuple[int, int], cur: tuple[int, int], dt_s: float, speed_bps: float) -> float:
    """Busier direction's bits per second over the link speed, clipped to [0, 1]."""
    busiest = max(cur[0] - prev[0], cur[1] - prev[1], 0)
    return min(max(busiest * 8 / (dt_s * speed_bps), 0.0), 1.0)


def retrans_rate(prev: tuple[int, int], cur: tuple[int, int]) -> float:
    out_segs = cur[0] - prev[0]
    return min(max((cur[1] - prev[1]) / out_segs, 0.0), 1.0) if out_segs > 0 else 0.0


# --------------------------------------------------------------------------------------- agent


@dataclass
class Peer:
    host: str
    port: int
    node: str = ""  # learned from its echoes when not configured


@dataclass
class AgentStats:
    sent: int = 0
    received: int = 0
    lost: int = 0
    answered: int = 0  # probes from others that we echoed
    per_peer: dict[str, int] = field(default_factory=dict)


class ProbeAgent(asyncio.DatagramProtocol):
    """Answers echoes and probes its peers; reports through ``emit(ts, dst, metric, value)``."""

    def __init__(self, node: str, peers: list[Peer], emit, rate_hz: float = 10.0, timeout_s: float = 1.0,
                 tick_s: float = 0.01) -> None:
        self.node = node
        self.peers = peers
        self.emit = emit
        self.rate_hz = rate_hz
        self.timeout_s = timeout_s
        self.tick_s = tick_s
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: dict[int, tuple[int, float, int]] = {}  # seq -> (peer index, sent epoch s, sent ns)
        self.seq = 0
        self.stats = AgentStats()
        self.answering = True
        self._by_addr = {(p.host, p.port): i for i, p in enumerate(peers)}

    # protocol ------------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        msg = decode_probe(data)
        if msg is None:
            return
        kind, seq, sent_ns, sender, _responder = msg
        if kind == PROBE:
            if self.answering:
                self.transport.sendto(encode_probe(ECHO, seq, sent_ns, sender, self.node), addr)
                self.stats.answered += 1
            return
        if sender != self.node:
            return
        entry = self.pending.pop(seq, None)
        if entry is None:
            return  # too late: already reported lost
        i, sent_s, ns = entry
        peer = self.peers[i]
        if not peer.node:
            peer.node = msg[4] or f"{peer.host}:{peer.port}"
        rtt_ms = (time.monotonic_ns() - ns) / 1e6
        self.stats.received += 1
        self.emit(sent_s, peer.node, "rtt_ms", rtt_ms)

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable and the like
        log.debug("probe socket: %s", exc)

    # loops -------------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        due = 0.0
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(self.tick_s)
            now = time.monotonic()
            due += (now - last) * self.rate_hz
            last = now
            n = int(due)
            due -= n
            for _ in range(n):
                for i, peer in enumerate(self.peers):
                    self._send(i, peer)
            self._expire()

    def _send(self, i: int, peer: Peer) -> None:
        self.seq += 1
        ns = time.monotonic_ns()
        self.pending[self.seq] = (i, time.time(), ns)
        try:
            self.transport.sendto(encode_probe(PROBE, self.seq, ns, self.node), (peer.host, peer.port))
        except OSError as exc:
            log.debug("send to %s:%d failed: %s", peer.host, peer.port, exc)
        self.stats.sent += 1

    def _expire(self) -> None:
        limit = time.monotonic_ns() - int(self.timeout_s * 1e9)
        for seq in [s for s, (_i, _t, ns) in self.pending.items() if ns < limit]:
            i, sent_s, _ns = self.pending.pop(seq)
            peer = self.peers[i]
            self.stats.lost += 1
            self.emit(sent_s, peer.node or f"{peer.host}:{peer.port}", "rtt_ms", math.nan)


class HostCounters:
    """NIC utilisation and TCP retransmissions, sampled every ``interval_s``."""

    def __init__(self, ifaces: list[str], speed_gbps: float | None, proc: Path = Path("/proc"),
                 sys_net: Path = Path("/sys/class/net")) -> None:
        self.ifaces = ifaces
        self.speed_gbps = speed_gbps
        self.proc = proc
        self.sys_net = sys_net
        self._dev = None
        self._snmp = None
        self._t = None
        self._warned: set[str] = set()

    def sample(self, emit) -> None:
        now = time.monotonic()
        dev = parse_net_dev((self.proc / "net" / "dev").read_text())
        try:
            snmp = parse_tcp_snmp((self.proc / "net" / "snmp").read_text())
        except (OSError, ValueError, KeyError):
            snmp = None
        if self._t is not None:
            dt = now - self._t
            ts = time.time()
            util = []
            for iface in self.ifaces:
                speed = link_speed_bps(iface, self.speed_gbps, self.sys_net)
                if speed is None:
                    if iface not in self._warned:
                        log.warning("no link speed for %s: set --link-gbps to report bw_util", iface)
                        self._warned.add(iface)
                    continue
                if iface in dev and iface in self._dev:
                    util.append(utilisation(self._dev[iface], dev[iface], dt, speed))
            if util:
                emit(ts, "", "bw_util", max(util))
            if snmp is not None and self._snmp is not None:
                emit(ts, "", "retrans_rate", retrans_rate(self._snmp, snmp))
        self._dev, self._snmp, self._t = dev, snmp, now


def parse_peer(text: str) -> Peer:
    """``ID=HOST:PORT`` or ``HOST:PORT``."""
    node, _, addr = text.rpartition("=")
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit() or not (0 < int(port) < 65536):
        raise ValueError(f"peer {text!r} is not [ID=]HOST:PORT")
    return Peer(host, int(port), node)


def read_peers_file(path: Path, me: str) -> list[Peer]:
    """One peer per line, ``[ID=]HOST:PORT`` or ``ID HOST:PORT``; '#' comments; this node skipped."""
    peers = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        peer = parse_peer(parts[0] if len(parts) == 1 else f"{parts[0]}={parts[1]}")
        if peer.node != me:
            peers.append(peer)
    return peers


async def run_agent(settings, node: str, listen: tuple[str, int], peers: list[Peer], rate_hz: float,
                    timeout_s: float, ifaces: list[str], link_gbps: float | None, stop: asyncio.Event,
                    nic_interval_s: float = 1.0) -> AgentStats:
    """Run until ``stop`` is set: answer and send probes, sample the host, produce everything."""
    from streams.probe.producer import ProbeProducer

    loop = asyncio.get_running_loop()
    async with ProbeProducer(settings) as out:
        def emit(ts, dst, metric, value):
            out.add(ts, node, dst, metric, None if (isinstance(value, float) and math.isnan(value)) else value)

        agent = ProbeAgent(node, peers, emit, rate_hz, timeout_s)
        transport, _ = await loop.create_datagram_endpoint(lambda: agent, local_addr=listen)
        host = HostCounters(ifaces, link_gbps)
        try:
            probing = asyncio.create_task(agent.run(stop))
            while not stop.is_set():
                try:
                    host.sample(emit)
                except OSError as exc:
                    log.warning("host counters unavailable: %s", exc)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), nic_interval_s)
            await probing
        finally:
            transport.close()
    return agent.stats
