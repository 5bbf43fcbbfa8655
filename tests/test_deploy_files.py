"""docker-compose.yml and the Dockerfile: no Docker engine here, so check their structure."""

from pathlib import Path

import yaml

from streams.config import Settings, env_name

ROOT = Path(__file__).resolve().parents[1]


def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_images():
    services = compose()["services"]
    assert set(services) == {"kafka", "worker", "sink"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["worker"]["build"] == "."
    assert services["worker"]["image"] == services["sink"]["image"] == "cnsched:latest"
    assert services["worker"]["command"] == ["worker"]
    assert services["sink"]["command"] == ["sink"]
    # scalable: no fixed container_name and no host port on the worker
    assert "container_name" not in services["worker"] and "ports" not in services["worker"]


def test_kafka_is_kraft_single_node():
    env = compose()["services"]["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka:9093"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka:9092"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # we create topics explicitly


def test_worker_and_sink_environment_is_valid_configuration():
    services = compose()["services"]
    known = {env_name(f) for f in Settings.model_fields}
    for name in ("worker", "sink"):
        env = services[name]["environment"]
        assert env["KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert set(env) <= known, set(env) - known
        fields = {f: env[env_name(f)] for f in Settings.model_fields if env_name(f) in env}
        Settings(**fields)  # validates
    assert services["sink"]["environment"]["CNSCHED_DUCKDB_PATH"].startswith("/data/")
    assert any(v.endswith(":/data") for v in services["sink"]["volumes"])


def test_dockerfile_installs_the_packages_and_runs_the_cli():
    text = (ROOT / "Dockerfile").read_text()
    for pkg in ("schemas", "core", "streams", "sinks"):
        assert f"COPY {pkg} ./{pkg}" in text
    assert 'ENTRYPOINT ["cnsched"]' in text
    assert "pip install --no-cache-dir ." in text
