import pytest

from streams.config import ConfigError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("CNSCHED_") or k == "KAFKA_BOOTSTRAP":
            monkeypatch.delenv(k)


def test_defaults_and_contract_names(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "k1:9092, k2:9093")
    monkeypatch.setenv("CNSCHED_PARTITIONS", "8")
    monkeypatch.setenv("CNSCHED_WINDOW_SECONDS", "30")
    monkeypatch.setenv("CNSCHED_WINDOW_STEP_SECONDS", "10")
    monkeypatch.setenv("CNSCHED_WEB_PORT", "7000")
    monkeypatch.setenv("CNSCHED_DUCKDB_PATH", "/tmp/x.duckdb")
    s = load_settings()
    assert s.bootstrap_servers == ["k1:9092", "k2:9093"]
    assert (s.partitions, s.window_seconds, s.window_step_seconds, s.web_port) == (8, 30, 10, 7000)
    assert str(s.duckdb_path) == "/tmp/x.duckdb"
    assert s.kafka_client_kwargs() == {
        "bootstrap_servers": ["k1:9092", "k2:9093"], "security_protocol": "PLAINTEXT"
    }


def test_every_invalid_field_is_listed(monkeypatch):
    monkeypatch.setenv("CNSCHED_PARTITIONS", "0")
    monkeypatch.setenv("CNSCHED_WEB_PORT", "http")
    monkeypatch.setenv("CNSCHED_LOG_LEVEL", "LOUD")
    with pytest.raises(ConfigError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.startswith("invalid configuration: ")
    assert "CNSCHED_PARTITIONS: Input should be greater than or equal to 1 (got '0')" in msg
    assert "CNSCHED_WEB_PORT" in msg and "'http'" in msg
    assert "CNSCHED_LOG_LEVEL" in msg and "'LOUD'" in msg


def test_cross_field_rules(monkeypatch):
    monkeypatch.setenv("CNSCHED_WINDOW_SECONDS", "5")
    monkeypatch.setenv("CNSCHED_WINDOW_STEP_SECONDS", "10")
    monkeypatch.setenv("CNSCHED_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "no-port")
    monkeypatch.setenv("CNSCHED_FORECAST_STEP_SECONDS", "7")
    monkeypatch.setenv("CNSCHED_RETENTION_RAW_DAYS", "100")  # raw kept longer than its minute roll-ups
    with pytest.raises(ConfigError) as err:
        load_settings()
    msg = str(err.value)
    assert "CNSCHED_WINDOW_STEP_SECONDS must not exceed CNSCHED_WINDOW_SECONDS" in msg
    assert "CNSCHED_FORECAST_STEP_SECONDS must divide a day" in msg
    assert "CNSCHED_RETENTION_RAW_DAYS <= CNSCHED_RETENTION_MINUTE_DAYS <= CNSCHED_RETENTION_HOUR_DAYS must hold" in msg
    for name in ("CNSCHED_SASL_MECHANISM", "CNSCHED_SASL_USERNAME", "CNSCHED_SASL_PASSWORD"):
        assert f"{name} is required with CNSCHED_SECURITY_PROTOCOL=SASL_SSL" in msg
    assert "KAFKA_BOOTSTRAP entry 'no-port' is not host:port" in msg


def test_sasl_settings_reach_the_kafka_clients(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "k1:9093")
    monkeypatch.setenv("CNSCHED_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("CNSCHED_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("CNSCHED_SASL_USERNAME", "sched")
    monkeypatch.setenv("CNSCHED_SASL_PASSWORD", "s3cret")
    kw = load_settings().kafka_client_kwargs()
    assert kw["security_protocol"] == "SASL_PLAINTEXT"
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("sched", "s3cret")
    assert "ssl_context" not in kw
    assert "s3cret" not in repr(load_settings())  # secrets never show in logs


def test_a_wildcard_web_host_binds_everywhere_and_advertises_the_hostname():
    import socket

    from streams.app import advertised_host
    from streams.config import load_settings

    s = load_settings(web_host="0.0.0.0")
    assert advertised_host(s) == socket.gethostname()
    assert advertised_host(load_settings()) == "127.0.0.1"  # the default: loopback, bound and advertised


def test_api_tokens_are_checked_and_never_shown():
    import pytest

    from streams.config import ConfigError, load_settings

    s = load_settings(api_tokens={"a" * 20: "write"})
    assert "a" * 20 not in repr(s)
    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_settings(api_tokens={"short": "write"})
    with pytest.raises(ConfigError, match="CNSCHED_API_TOKENS"):
        load_settings(api_tokens={"b" * 20: "admin"})
    with pytest.raises(ConfigError, match="must exceed"):
        load_settings(web_request_timeout_seconds=5, decision_timeout_seconds=10)
