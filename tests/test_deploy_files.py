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
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # we create topics explicitly


def test_kafka_is_internal_and_takes_scram_clients_only():
    """Issue 15: Kafka was published unauthenticated on every interface of the host."""
    c = compose()
    kafka = c["services"]["kafka"]
    env = kafka["environment"]
    assert "ports" not in kafka and kafka["networks"] == ["backend"] and c["networks"]["backend"]["internal"]
    listeners = dict(x.split("://") for x in env["KAFKA_LISTENERS"].split(","))
    protocols = dict(x.split(":") for x in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    # every listener reachable from another container authenticates; PLAINTEXT only on loopback
    for name, addr in listeners.items():
        if protocols[name] == "PLAINTEXT" and name != "CONTROLLER":
            assert addr.startswith("127.0.0.1:"), (name, addr)
    assert env["KAFKA_ADVERTISED_LISTENERS"].startswith("SASL_PLAINTEXT://kafka:9092")
    assert env["KAFKA_SASL_ENABLED_MECHANISMS"] == "SCRAM-SHA-512"
    assert "SCRAM-SHA-512=[password=" in kafka["healthcheck"]["test"][1]
    for name in ("worker", "sink"):
        svc = c["services"][name]
        assert svc["environment"]["CNSCHED_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert svc["environment"]["CNSCHED_SASL_MECHANISM"] == "SCRAM-SHA-512"
        assert "backend" in svc["networks"] and "ports" not in svc


def test_worker_and_sink_environment_is_valid_configuration():
    services = compose()["services"]
    known = {env_name(f) for f in Settings.model_fields}
    for name in ("worker", "sink"):
        env = services[name]["environment"]
        assert env["KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert set(env) <= known, set(env) - known
        fields = {f: env[env_name(f)] for f in Settings.model_fields if env_name(f) in env}
        fields = {f: "x" * 16 if str(v).startswith("${") else v for f, v in fields.items()}  # from the shell
        Settings(**fields)  # validates
    assert services["sink"]["environment"]["CNSCHED_DUCKDB_PATH"].startswith("/data/")
    assert any(v.endswith(":/data") for v in services["sink"]["volumes"])


def test_dockerfile_installs_the_packages_and_runs_the_cli():
    text = (ROOT / "Dockerfile").read_text()
    for pkg in ("schemas", "core", "streams", "sinks"):
        assert f"COPY {pkg} ./{pkg}" in text
    assert 'ENTRYPOINT ["cnsched"]' in text
    assert "pip install --no-cache-dir ." in text
