"""docker-compose.yml and the Dockerfile: no Docker engine here, so check their structure."""

from pathlib import Path

import yaml

from streams.config import Settings, env_name

ROOT = Path(__file__).resolve().parents[1]


def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_images():
    services = compose()["services"]
    assert set(services) == {"kafka", "worker", "sink", "prometheus", "grafana"}
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


def test_prometheus_scrapes_every_worker_and_grafana_is_provisioned():
    c = compose()["services"]
    prom = c["prometheus"]
    assert "backend" not in prom["networks"] and "ports" not in prom  # no route to Kafka, not published
    mounts = dict(v.split(":", 1) for v in prom["volumes"])
    assert mounts["./deploy/prometheus.yml"] == "/etc/prometheus/prometheus.yml:ro"
    cfg = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    (job,) = cfg["scrape_configs"]
    (sd,) = job["dns_sd_configs"]
    port = int(c["worker"]["environment"]["CNSCHED_WEB_PORT"])
    assert job["metrics_path"] == "/metrics" and sd["names"] == ["worker"] and sd["port"] == port
    graf = c["grafana"]
    assert graf["ports"] == ["127.0.0.1:3000:3000"]  # this host only
    assert graf["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    mounts = {host: inside.removesuffix(":ro") for host, inside in (v.split(":", 1) for v in graf["volumes"])}
    ds = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090" and ds["datasources"][0]["uid"] == "prometheus"
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/cnsched.yml").read_text())
    # the provider's path is where the dashboards directory is mounted
    assert mounts["./deploy/grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"


def emitted_metrics() -> set[str]:
    """Every metric name the code records (Counters.inc/set/observe with a literal name)."""
    import re

    from streams.metrics import HISTOGRAMS

    names = set(HISTOGRAMS)
    for path in (ROOT / "streams").rglob("*.py"):
        names |= set(re.findall(r'\.(?:inc|set|observe)\(\s*"([a-z_]+)"', path.read_text()))
    return {f"cnsched_{n}" for n in names}


def test_the_grafana_dashboard_asks_for_metrics_the_workers_export():
    import json
    import re

    dash = json.loads((ROOT / "deploy/grafana/dashboards/cnsched.json").read_text())
    assert dash["uid"] == "cnsched" and dash["panels"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    known = emitted_metrics()
    assert {"cnsched_decision_seconds", "cnsched_window_result_lag_seconds", "cnsched_ingest_batch_samples",
            "cnsched_rescore_seconds", "cnsched_scheduler_tasks", "cnsched_inventory_nodes"} <= known
    asked = set()
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == "prometheus" and panel["targets"], panel["title"]
        for t in panel["targets"]:
            for name in re.findall(r"cnsched_[a-z_]+", t["expr"]):
                asked.add(re.sub(r"_(bucket|sum|count)$", "", name) if "_bucket" in name or name.endswith(
                    ("_sum", "_count")) else name)
    assert asked and asked <= known, asked - known
    # the four histograms the issue names are all on the dashboard
    assert {"cnsched_decision_seconds", "cnsched_window_result_lag_seconds", "cnsched_ingest_batch_samples",
            "cnsched_rescore_seconds"} <= asked


def test_make_test_installs_haproxy_for_the_route_agent_s_test():
    """The route agent's test skips only where haproxy cannot be installed (not root): `make test`
    runs `unit`, which needs the `haproxy` target, which installs Debian's haproxy when missing."""
    make = (ROOT / "Makefile").read_text()
    unit = next(line for line in make.splitlines() if line.startswith("unit:"))
    assert "haproxy" in unit.split(":", 1)[1].split()
    target = make[make.index("\nhaproxy:"):].split("\n\n", 1)[0]
    assert "apt-get install" in target and "haproxy" in target.split("apt-get install", 1)[1]
