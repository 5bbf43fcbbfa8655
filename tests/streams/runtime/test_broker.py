import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from streams.runtime.broker import BrokerError, EmbeddedBroker, kafka_api_versions


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_starts_answers_kafka_and_stops():
    broker = EmbeddedBroker()
    bootstrap = broker.start()
    host, port = bootstrap.split(":")
    pid = broker.proc.pid
    try:
        assert kafka_api_versions(host, int(port))
    finally:
        broker.stop()
    assert not kafka_api_versions(host, int(port))
    assert not _alive(pid)


def test_port_taken_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(port=port).start()


def test_missing_binary_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CNSCHED_BROKER_BIN", str(tmp_path / "nope"))
    with pytest.raises(BrokerError, match="broker binary not found"):
        EmbeddedBroker().start()


def test_broker_not_answering_in_time_is_a_clear_error_and_leaves_no_process(tmp_path):
    silent = tmp_path / "silent-broker"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    broker = EmbeddedBroker(binary=str(silent), startup_timeout_s=1.0)
    with pytest.raises(BrokerError, match="not answering Kafka requests .* after 1 s"):
        broker.start()
    assert broker.proc is None


def test_broker_dies_with_its_parent_even_on_sigkill(tmp_path):
    pidfile = tmp_path / "pid"
    script = textwrap.dedent(f"""
        import time
        from streams.runtime.broker import EmbeddedBroker
        b = EmbeddedBroker()
        b.start()
        open({str(pidfile)!r}, "w").write(str(b.proc.pid))
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "broker outlived its SIGKILLed parent"


def test_a_restart_reuses_the_port_while_old_connections_are_in_time_wait():
    first = EmbeddedBroker()
    host, port = first.start().split(":")
    client = socket.create_connection((host, int(port)))
    try:
        first.stop()  # the broker closes its side first: that side of the connection sits in TIME_WAIT
    finally:
        client.close()
    again = EmbeddedBroker(port=int(port))
    try:
        assert again.start() == f"{host}:{port}"
        assert kafka_api_versions(host, int(port))
    finally:
        again.stop()


async def _ends_after_batches(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streams.config import Settings
    from streams.kafka import ensure_topics
    from streams.runtime.faust_patches import true_ends

    settings = Settings(kafka_bootstrap=bootstrap, topic_prefix="ends.")
    await ensure_topics(settings, ("probe.samples",))
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    await p.start()
    tp = TopicPartition("ends.probe.samples", 0)
    seen = []
    try:
        for size in (50, 1, 7):  # the last batch of 7 records: the end is 58
            futs = [await p.send(tp.topic, b"v", partition=0) for _ in range(size)]
            await p.flush()
            assert [(await f).offset for f in futs][-1] == sum((50, 1, 7)[: len(seen) + 1]) - 1
            seen.append(size)
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await c.start()
    try:
        listed = await c.end_offsets([tp])
    finally:
        await c.stop()
    lagging = {tp: 10}  # an end several batches short (in the first batch of 50)
    return (listed[tp], (await true_ends(settings.kafka_client_kwargs(), listed))[tp],
            (await true_ends(settings.kafka_client_kwargs(), lagging))[tp])


def test_true_ends_correct_list_offsets_of_a_broker_that_reports_batch_starts():
    """Tansu 0.6 answers ListOffsets with the last batch's base offset + 1 (52 here, not 58): Faust's
    table recovery stopped there and a restarted worker lost the last batch of its window state."""
    import asyncio

    with EmbeddedBroker() as bootstrap:
        listed, true, from_lagging = asyncio.run(_ends_after_batches(bootstrap))
    assert true == 58
    # an end that lags by more than one batch (a restarted worker's changelog after a SIGKILL, issue
    # 32): read on to the last record the broker holds, not to the end of the batch holding end - 1
    assert from_lagging == 58
    assert listed in (52, 58)  # 52 on the embedded broker today; 58 once it is fixed (and on Kafka)
