"""Shared fixtures. Integration tests talk to a real broker: the embedded Tansu broker, started
once per test session, or the cluster named by KAFKA_BOOTSTRAP."""

from __future__ import annotations

import os
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
    for k in list(os.environ):
        if k.startswith("CNSCHED_"):
            monkeypatch.delenv(k)

    def make(**overrides) -> Settings:
        run = uuid.uuid4().hex[:8]
        base = dict(
            kafka_bootstrap=kafka_bootstrap,
            topic_prefix=f"t{run}.",
            app_id=f"cnsched-test-{run}",
            data_dir=tmp_path / "data",
            duckdb_path=tmp_path / "cnsched.duckdb",
            web_port=_free_port(),
        )
        base.update(overrides)
        return Settings(**base)

    return make


def _free_port() -> int:
    from streams.runtime.broker import free_port

    return free_port()
