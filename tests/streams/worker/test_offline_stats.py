"""`cnsched stats`: the ingest code path offline; three input encodings, one answer."""

import json
import subprocess
import sys

import numpy as np
import pytest

from schemas.probe import encode_arrow
from streams.worker.offline import window_stats_offline


def samples(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    ts = 1_700_000_000 + np.sort(rng.uniform(0, 30, n))
    v = rng.lognormal(0, 0.3, n)
    v[::101] = np.nan
    dst = np.where(rng.random(n) < 0.5, "b", "c")
    return ts, v, dst


def run(args, data: bytes):
    return subprocess.run([sys.executable, "-m", "streams.cli", "stats", *args], input=data,
                          capture_output=True, timeout=120)


def test_json_array_json_lines_and_arrow_give_the_same_results(tmp_path):
    ts, v, dst = samples()
    docs = [{"ts": float(t), "src": "a", "dst": str(d), "metric": "rtt_ms",
             "value": None if np.isnan(x) else float(x)} for t, x, d in zip(ts, v, dst, strict=True)]
    as_array = json.dumps(docs).encode()
    as_lines = "\n".join(json.dumps(d) for d in docs).encode()
    as_arrow = encode_arrow(ts, ["a"] * ts.size, dst, ["rtt_ms"] * ts.size, v)
    outs = []
    for data in (as_array, as_lines, as_arrow):
        r = run(["--window-seconds", "10", "--json"], data)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1] == outs[2]
    res = outs[0]
    assert len(res) == 6  # 3 windows x 2 paths
    assert set(res[0]) == {"src", "dst", "metric", "window_start", "window_end", "count", "kept",
                           "outliers", "lost", "mean", "p50", "p95", "p99", "min", "max"}
    assert sum(r["count"] for r in res) == ts.size
    assert sum(r["lost"] for r in res) == int(np.isnan(v).sum())
    # a file argument reads the same as stdin
    f = tmp_path / "s.arrow"
    f.write_bytes(as_arrow)
    r = run([str(f), "--window-seconds", "10", "--json"], b"")
    assert json.loads(r.stdout) == res


def test_hopping_windows_from_the_command_line():
    ts, v, dst = samples()
    r = run(["--window-seconds", "10", "--step-seconds", "5", "--json"],
            encode_arrow(ts, ["a"] * ts.size, ["b"] * ts.size, ["rtt_ms"] * ts.size, v))
    starts = sorted({w["window_start"] for w in json.loads(r.stdout)})
    assert np.diff(starts).tolist() == [5.0] * (len(starts) - 1) and len(starts) == 7


def test_bad_rows_are_counted_on_stderr_and_good_rows_kept():
    data = json.dumps([{"ts": 100.0, "src": "a", "dst": "", "metric": "bw_util", "value": 0.5},
                       {"ts": 100.0, "src": "a", "dst": "", "metric": "bw_util", "value": 5}]).encode()
    r = run(["--json"], data)
    assert r.returncode == 0
    assert json.loads(r.stdout)[0]["count"] == 1
    assert b"2 samples, 1 rejected, 0 late" in r.stderr


@pytest.mark.parametrize("args,code,message", [
    (["--json"], 1, b"cnsched: stats: message 1: neither JSON nor an Arrow IPC stream"),
    (["--window-seconds", "10", "--step-seconds", "20"], 2, b"1 <= step <= window"),
    (["/nonexistent/file"], 2, b"cannot read /nonexistent/file"),
])
def test_bad_input_and_bad_use_exit_non_zero_with_one_line(args, code, message):
    r = run(args, b"\x00garbage")
    assert r.returncode == code
    assert message in r.stderr and r.stderr.strip().count(b"\n") == 0


def test_empty_input_gives_no_windows():
    assert window_stats_offline(b"[]", 10, 10, 0) == ([], {"samples": 0, "rejected": 0, "late": 0})
