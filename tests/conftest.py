"""Shared fixtures. Integration tests talk to a real broker: the embedded Tansu broker, started
once per test session, or the cluster named by KAFKA_BOOTSTRAP."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from streams.config import Settings
from streams.runtime.broker import EmbeddedBroker
from streams.runtime.faust_patches import no_topic_auto_creation

# the tests' own clients, like the worker's and the sink's, never create a topic by asking for it: a topic
# the test forgot to create fails loudly, and a broker restart cannot give a state topic 4 partitions
no_topic_auto_creation()


@pytest.fixture(scope="session")
def kafka_bootstrap():
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield os.environ["KAFKA_BOOTSTRAP"]
        return
    with EmbeddedBroker() as bootstrap:
        yield bootstrap


@pytest.fixture
def make_settings(kafka_bootstrap, tmp_path, monkeypatch):
    """Settings isolated per test: own topic prefix, consumer group and data directory."""
    return _factory(kafka_bootstrap, tmp_path, monkeypatch)


class MockKafka:
    """librdkafka's mock cluster in a process of its own (tests/helpers/mock_kafka.py): a second Kafka
    implementation. Topics are made through it, before anything asks for them."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.mock_kafka"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.bootstrap = self.proc.stdout.readline().strip()
        assert self.bootstrap, "the mock cluster did not start"

    def create(self, name: str, partitions: int) -> None:
        self.proc.stdin.write(f"topic {name} {partitions}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer == f"ok {name}", answer

    def create_for(self, settings: Settings) -> None:
        """Every topic a worker of ``settings`` and the tests use, with the partitions ensure_topics gives."""
        from schemas.topics import ALL_TOPICS, STATE_TOPICS
        from streams.kafka import table_changelogs

        for n in ALL_TOPICS:
            self.create(settings.topic(n), 1 if n in STATE_TOPICS else settings.partitions)
        for name, partitions in table_changelogs(settings, settings.partitions).items():
            self.create(name, partitions)
        self.create(f"{settings.app_id}-__assignor-__leader", 1)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="session")
def mock_kafka():
    m = MockKafka()
    yield m
    m.close()


@pytest.fixture(params=["embedded", "mock"])
def make_settings_both(request, kafka_bootstrap, tmp_path, monkeypatch):
    """make_settings on each Kafka implementation in turn: the embedded broker (or KAFKA_BOOTSTRAP), and
    librdkafka's mock cluster (its topics made up front: aiokafka's admin client cannot create them there)."""
    if request.param == "embedded":
        return _factory(kafka_bootstrap, tmp_path, monkeypatch)
    m = request.getfixturevalue("mock_kafka")
    return _factory(m.bootstrap, tmp_path, monkeypatch, m.create_for)


def _factory(bootstrap: str, tmp_path, monkeypatch, on_new=None):
    for k in list(os.environ):
        if k.startswith("CNSCHED_"):
            monkeypatch.delenv(k)

    def make(**overrides) -> Settings:
        run = uuid.uuid4().hex[:8]
        base = dict(
            kafka_bootstrap=bootstrap,
            topic_prefix=f"t{run}.",
            app_id=f"cnsched-test-{run}",
            data_dir=tmp_path / "data",
            duckdb_path=tmp_path / "cnsched.duckdb",
            web_port=_free_port(),
        )
        if on_new is not None:  # topics are made up front there, by on_new
            base["kafka_create_topics"] = False
        base.update(overrides)
        settings = Settings(**base)
        if on_new is not None:
            on_new(settings)
        return settings

    return make


def _free_port() -> int:
    from streams.runtime.broker import free_port

    return free_port()
