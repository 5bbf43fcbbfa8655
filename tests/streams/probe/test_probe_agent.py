"""The probe agent: parsing of /proc, and three agents probing each other on loopback through a
real broker (RTT > 0 and no loss; loss once a peer stops answering)."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys

import numpy as np
import pytest

from schemas.probe import decode_samples
from schemas.topics import PROBE_SAMPLES
from streams.kafka import consumer, ensure_topics
from streams.probe.agent import (
    ECHO,
    PROBE,
    HostCounters,
    Peer,
    decode_probe,
    encode_probe,
    parse_net_dev,
    parse_peer,
    parse_tcp_snmp,
    read_peers_file,
    retrans_rate,
    run_agent,
    utilisation,
)
from streams.runtime.broker import free_port

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5000000   400   0    0    0     0          0         0  2500000     300    0    0    0     0       0          0
"""
SNMP = """Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 10 5 0 0 2 1000 2000 20 0 0 0
"""


def test_proc_parsers_worked_example():
    assert parse_net_dev(NET_DEV) == {"lo": (1000, 1000), "eth0": (5000000, 2500000)}
    assert parse_tcp_snmp(SNMP) == (2000, 20)
    # 1.25 MB received in 1 s on a 100 Mbit/s link: 10 Mbit / 100 Mbit = 0.1
    assert utilisation((0, 0), (1_250_000, 10), 1.0, 100e6) == pytest.approx(0.1)
    assert utilisation((0, 0), (10**12, 0), 1.0, 1e6) == 1.0  # clipped
    # 20 retransmitted of 2000 sent: 1 %
    assert retrans_rate((0, 0), (2000, 20)) == pytest.approx(0.01)
    assert retrans_rate((5, 5), (5, 5)) == 0.0


def test_host_counters_from_files(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "sys" / "eth0").mkdir(parents=True)
    (tmp_path / "sys" / "eth0" / "speed").write_text("100\n")  # Mbit/s
    (tmp_path / "net" / "dev").write_text(NET_DEV)
    (tmp_path / "net" / "snmp").write_text(SNMP)
    got = []
    h = HostCounters(["eth0"], None, proc=tmp_path, sys_net=tmp_path / "sys")
    h.sample(lambda *a: got.append(a))
    assert got == []  # the first sample is the baseline
    (tmp_path / "net" / "dev").write_text(NET_DEV.replace("5000000", "6250000"))
    (tmp_path / "net" / "snmp").write_text(SNMP.replace("2000 20", "4000 60"))
    h._t -= 1.0  # as if one second passed
    h.sample(lambda *a: got.append(a))
    by_metric = {m: v for _ts, _dst, m, v in got}
    assert by_metric["bw_util"] == pytest.approx(0.1, rel=0.01)
    assert by_metric["retrans_rate"] == pytest.approx(0.02)


def test_probe_wire_format_and_foreign_packets():
    assert decode_probe(encode_probe(PROBE, 7, 123, "a")) == (PROBE, 7, 123, "a", "")
    assert decode_probe(encode_probe(ECHO, 7, 123, "a", "b")) == (ECHO, 7, 123, "a", "b")
    for junk in (b"", b"hello", b"CNSP", b"CNSP\x09" + b"\x00" * 17):
        assert decode_probe(junk) is None


def test_peer_parsing(tmp_path):
    assert parse_peer("n2=127.0.0.1:7001") == Peer("127.0.0.1", 7001, "n2")
    assert parse_peer("10.0.0.5:7001") == Peer("10.0.0.5", 7001, "")
    with pytest.raises(ValueError):
        parse_peer("n2=nohost")
    f = tmp_path / "peers"
    f.write_text("# group\nn1 127.0.0.1:7001\nn2=127.0.0.1:7002\n127.0.0.1:7003\n")
    assert [p.node for p in read_peers_file(f, "n1")] == ["n2", ""]


async def collect_samples(settings, expect_until) -> list[dict]:
    c = consumer(settings, PROBE_SAMPLES, group_id=None)
    await c.start()
    rows = []
    try:
        for _ in range(100):
            for _tp, msgs in (await c.getmany(timeout_ms=300)).items():
                for m in msgs:
                    rows += decode_samples(m.value).rows()
            if expect_until(rows):
                break
    finally:
        await c.stop()
    return rows


@pytest.mark.integration
async def test_three_agents_on_loopback_then_one_stops_answering(make_settings):
    settings = make_settings()
    await ensure_topics(settings)
    ports = {n: free_port() for n in ("a", "b", "c")}
    addr = {n: ("127.0.0.1", p) for n, p in ports.items()}
    stops = {n: asyncio.Event() for n in ports}

    def peers_of(me):
        return [Peer("127.0.0.1", ports[n], n) for n in ports if n != me]

    tasks = {n: asyncio.create_task(run_agent(settings, n, addr[n], peers_of(n), 50.0, 0.5, [], None, stops[n],
                                              nic_interval_s=0.5)) for n in ports}
    await asyncio.sleep(2.0)
    stops["c"].set()  # c stops: it answers nothing any more
    stats_c = await tasks["c"]
    await asyncio.sleep(2.0)
    stops["a"].set()
    stops["b"].set()
    stats_a, stats_b = await tasks["a"], await tasks["b"]
    assert stats_b.answered > 50
    assert stats_a.sent > 100 and stats_c.answered > 50

    rows = await collect_samples(settings, lambda r: sum(1 for x in r if x["src"] == "a" and x["dst"] == "c"
                                                         and x["value"] is None) > 10)
    rtt = {(r["src"], r["dst"]): [] for r in rows}
    for r in rows:
        rtt[(r["src"], r["dst"])].append(r)
    ab = [r["value"] for r in rtt[("a", "b")]]
    assert len(ab) > 50
    finite = [v for v in ab if v is not None]
    assert all(0 < v < 100 for v in finite)  # loopback: well under 100 ms
    # a -> b while both run: no loss (probes still in flight at the very end may be dropped)
    assert len(finite) >= len(ab) - 1
    # a -> c: answered while c ran, then lost
    ac = rtt[("a", "c")]
    answered = [r for r in ac if r["value"] is not None]
    lost = [r for r in ac if r["value"] is None]
    assert answered and lost
    assert max(r["ts"] for r in answered) < min(r["ts"] for r in lost) + 0.6
    assert all(r["metric"] == "rtt_ms" for r in ac)
    assert math.isfinite(np.median(finite))


@pytest.mark.integration
def test_probe_cli_runs_and_reports(make_settings):
    settings = make_settings()
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env.update(KAFKA_BOOTSTRAP=settings.kafka_bootstrap, CNSCHED_TOPIC_PREFIX=settings.topic_prefix)
    p1, p2 = free_port(), free_port()
    a = subprocess.Popen([sys.executable, "-m", "streams.cli", "probe", "--node", "x", "--listen", f"127.0.0.1:{p1}",
                          "--peer", f"y=127.0.0.1:{p2}", "--rate", "20", "--seconds", "3", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    b = subprocess.Popen([sys.executable, "-m", "streams.cli", "probe", "--node", "y", "--listen", f"127.0.0.1:{p2}",
                          "--peer", f"x=127.0.0.1:{p1}", "--rate", "20", "--seconds", "3", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out_a, err_a = a.communicate(timeout=60)
    b.communicate(timeout=60)
    assert a.returncode == 0, err_a
    import json

    stats = json.loads(out_a.strip().splitlines()[-1])
    assert stats["sent"] > 20 and stats["received"] > 10 and stats["answered"] > 10
    bad = subprocess.run([sys.executable, "-m", "streams.cli", "probe", "--node", "x", "--peer", "nope"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "is not [ID=]HOST:PORT" in bad.stderr
