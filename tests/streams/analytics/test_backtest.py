"""`cnsched backtest` on a real DuckDB file of stored window results."""

import json
import os
import subprocess
import sys

import numpy as np

from sinks.duckdb_store import DuckStore


def fill(path, days: float, paths=4, seed=0):
    """Minute windows of diurnal p95 RTT with noise and spikes, as the sink stores them."""
    rng = np.random.default_rng(seed)
    store = DuckStore(path)
    steps = int(days * 1440)
    rows = []
    for k in range(paths):
        base = rng.uniform(1, 50)
        for i in range(steps):
            v = base * (1 + 0.3 * np.sin(2 * np.pi * i / 1440 + k)) * (1 + rng.normal(0, 0.02))
            if rng.random() < 0.01:
                v *= 8
            rows.append(dict(src=f"n{k}", dst="hub", metric="rtt_ms", window_start=i * 60.0,
                             window_end=i * 60.0 + 60, count=60, kept=60, outliers=0, lost=0, mean=v,
                             p50=v, p95=v, p99=v, min=v, max=v))
    store.write_windows(rows)
    store.close()


def run(path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_DUCKDB_PATH"] = str(path)
    return subprocess.run([sys.executable, "-m", "streams.cli", "backtest", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_backtest_reports_errors_of_forecast_and_baselines(tmp_path):
    db = tmp_path / "h.duckdb"
    fill(db, days=7)
    r = run(db, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["series"] == 4 and out["horizon_steps"] == 60 and out["history_steps"] == 7 * 1440 - 60
    assert out["forecast_mae"] < out["seasonal_naive_mae"] and out["forecast_mae"] < out["last_value_mae"]
    assert out["forecast_mase"] < out["seasonal_naive_mase"]


def test_too_little_history_says_how_much_is_needed(tmp_path):
    db = tmp_path / "short.duckdb"
    fill(db, days=1)
    r = run(db)
    assert r.returncode == 1
    assert r.stderr.strip() == ("cnsched: backtest: 4 series of rtt_ms p95: needs at least 2940 steps of history "
                                "(two days and the horizon), has 1440")
    bad = run(db, "--stat", "p42")
    assert bad.returncode == 2 and "stat must be one of" in bad.stderr
