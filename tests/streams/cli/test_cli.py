"""The `cnsched` command as a user runs it: a real process, real exit codes, real output."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from streams.runtime.broker import kafka_api_versions


def run(*args, env=None, timeout=60):
    base = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_") and k != "KAFKA_BOOTSTRAP"}
    return subprocess.run([sys.executable, "-m", "streams.cli", *args], capture_output=True,
                          text=True, env={**base, **(env or {})}, timeout=timeout)


def test_help_lists_the_commands():
    r = run("--help")
    assert r.returncode == 0
    for cmd in ("broker", "worker", "topics", "demo", "submit", "query", "battery", "report", "sink", "sql", "tasks",
                "nodes", "describe", "cancel", "hold", "release", "priority", "cordon", "drain", "uncordon", "slurm"):
        assert cmd in r.stdout
    from importlib.metadata import version

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"cnsched {version('cnsched')}"


def test_bad_usage_is_one_clear_line_and_exit_2():
    r = run("demo", "--seconds", "soon")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "invalid float value: 'soon'" in r.stderr
    r = run("launch")
    assert r.returncode == 2 and "invalid choice: 'launch'" in r.stderr


def test_bench_api_refuses_an_empty_burst_in_one_line():
    r = run("bench", "api", "--requests", "0")
    assert r.returncode == 2 and r.stderr.strip() == "cnsched: error: --requests must be at least 1"


def test_bench_replay_refuses_an_unknown_policy_and_no_rounds_in_one_line():
    r = run("bench", "replay", "--policies", "ours,greedy")
    assert r.returncode == 2 and r.stderr.strip().startswith("cnsched: error: --policies: a comma-separated list of")
    r = run("bench", "replay", "--rounds", "0")
    assert r.returncode == 2 and r.stderr.strip() == "cnsched: error: --rounds must be at least 1"


def test_bench_detect_refuses_a_second_set_that_is_not_there_in_one_line(tmp_path):
    r = run("bench", "detect", "--rtt-dir", str(tmp_path), "--cv", "--also", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stderr.strip() == f"cnsched: error: --also {tmp_path / 'nope'}: not a directory"
    r = run("bench", "detect", "--cv", "--method", "arima")
    assert r.returncode == 2 and "invalid choice: 'arima'" in r.stderr and r.stderr.strip().count("\n") == 0


def test_submit_and_query_say_what_is_wrong(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    r = run("submit", str(bad))
    assert r.returncode == 2 and "is not JSON" in r.stderr and r.stderr.count("\n") == 1
    r = run("submit", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "No such file" in r.stderr
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there
    r = run("query", "node", "n1", "--url", f"http://127.0.0.1:{port}")
    assert r.returncode == 1 and r.stderr.startswith(f"cnsched: query: cannot reach the worker at http://127.0.0.1:{port}")
    r = run("query", "galaxy", "x")
    assert r.returncode == 2 and "invalid choice: 'galaxy'" in r.stderr


def test_invalid_configuration_lists_every_field():
    r = run("topics", env={"CNSCHED_PARTITIONS": "-1", "CNSCHED_WINDOW_SECONDS": "x"})
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "CNSCHED_PARTITIONS" in r.stderr and "CNSCHED_WINDOW_SECONDS" in r.stderr


def test_worker_without_bootstrap_says_what_to_do():
    r = run("worker")
    assert r.returncode == 2
    assert "KAFKA_BOOTSTRAP is not set" in r.stderr


def test_broker_command_prints_address_and_stops_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "streams.cli", "broker"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("KAFKA_BOOTSTRAP=127.0.0.1:")
        host, port = line.split("=", 1)[1].split(":")
        assert kafka_api_versions(host, int(port))
        proc.send_signal(signal.SIGTERM)
        # both pipes read to the end: a child writing to a full pipe nobody reads would never exit
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
        assert not kafka_api_versions(host, int(port))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_broker_on_a_taken_port_fails_with_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run("broker", "--port", str(port))
    assert r.returncode == 1
    assert r.stderr.strip() == f"cnsched: broker: port {port} on 127.0.0.1 is already in use"


def _processes_with(marker: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "environ").read_bytes():
                    found.append(int(p.name))
            except OSError:
                pass
    return found


@pytest.mark.integration
def test_demo_shows_windows_flowing_exits_0_and_leaves_no_process(tmp_path):
    marker = f"CNSCHED_TEST_RUN_MARK_{uuid.uuid4().hex}"
    env = {"DEMO_MARK": marker, "CNSCHED_WINDOW_SECONDS": "2", "CNSCHED_WINDOW_STEP_SECONDS": "2",
           "CNSCHED_ALLOWED_LATENESS_SECONDS": "0.5", "CNSCHED_DATA_DIR": str(tmp_path),
           "CNSCHED_WEB_PORT": str(_free_port())}
    r = run("demo", "--seconds", "10", "--rate", "20", env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "window " in r.stdout and "rtt_ms" in r.stdout
    assert "deadltr  undecodable" in r.stdout and "deadltr  out_of_range" in r.stdout
    assert "summary" in r.stdout
    assert _processes_with(marker) == []


def _free_port():
    from streams.runtime.broker import free_port

    return free_port()


def test_topics_against_a_dead_broker_is_one_line_and_exit_1():
    r = run("topics", env={"CNSCHED_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("cnsched: broker: cannot use the broker at 127.0.0.1:1")


def test_a_bare_drain_deadline_is_refused_and_a_closed_pipe_ends_quietly(tmp_path):
    """Issue 51, finding 10: `--deadline 30` is 30 s to us and 30 minutes to Slurm: refused, saying
    so; `cnsched ... | head` ends without a BrokenPipe traceback."""
    r = run("drain", "n1", "--deadline", "30", "--url", "127.0.0.1:1")
    assert r.returncode == 2 and r.stderr.strip() == ("cnsched: error: drain: --deadline '30' has no unit: write 30s, "
                                                      "30min or 30h (a bare number is seconds here and minutes to Slurm)")
    samples = tmp_path / "s.jsonl"
    samples.write_text("".join(f'{{"ts": {1_700_000_000 + t}, "src": "n{i}", "dst": "m", "metric": "rtt_ms", '
                               f'"value": 1.0}}\n' for i in range(400) for t in range(0, 40, 5)))
    base = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_") and k != "KAFKA_BOOTSTRAP"}
    r = subprocess.run(f"'{sys.executable}' -m streams.cli stats '{samples}' --json | head -c 100", shell=True,
                       capture_output=True, text=True, env=base, timeout=60)
    assert len(r.stdout) == 100 and r.stderr == "", r.stderr
