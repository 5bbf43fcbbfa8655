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


def test_backtest_scores_rolling_origins_on_the_one_step_naive_scale(tmp_path):
    db = tmp_path / "h.duckdb"
    fill(db, days=7)
    r = run(db, "--json", "--days", "2", "--rows")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # 7 days, 60-minute horizon every 60 minutes, origins over the last 2 days with two days behind
    # each: 48 origins x 4 series scored
    assert (out["series"], out["series_scored"], out["origins"], out["scores"]) == (4, 4, 48, 192)
    assert out["scale"] == "in-sample MAE of the one-step naive forecast" and out["skipped"] == {}
    assert out["forecast_mase"] < out["last_value_mase"] and out["forecast_mase"] < out["seasonal_naive_mase"]
    assert out["forecast_vs_last_value"] == out["forecast_mase"] / out["last_value_mase"]
    assert [row["series"] for row in out["rows"]] == ["n0->hub", "n1->hub", "n2->hub", "n3->hub"]
    assert all(row["forecast"] < row["last_value"] for row in out["rows"])


def test_backtest_mase_worked_example_and_skipped_series():
    from streams.analytics.backtest import SKIP_CONSTANT, SKIP_NO_TRUTH, SKIP_SHORT, backtest

    day, horizon = 24, 4  # hourly steps
    t = 3 * day + horizon
    up = np.where(np.arange(t) % 2 == 0, 10.0, 12.0)  # alternating: one-step naive error 2
    values = np.stack([up, np.r_[np.full(t - day, np.nan), np.ones(day)],  # one day of history only
                       np.r_[np.ones(t - horizon), np.full(horizon, np.nan)],  # nothing after the origin
                       np.full(t, 5.0)])  # constant: naive error 0
    out = backtest(values, 0.0, 3600.0, horizon, day, days=horizon / day)
    assert out["origins"] == 1 and out["series_scored"] == 1
    assert out["skipped"] == {SKIP_SHORT: 1, SKIP_NO_TRUTH: 1, SKIP_CONSTANT: 1}
    # last value 12 against truth 10, 12, 10, 12: MAE 1, scale 2 -> MASE 0.5; seasonal naive (a day
    # earlier: the same phase) is exact
    assert out["last_value_mase"] == 0.5 and out["seasonal_naive_mase"] == 0.0


def test_too_little_history_says_how_much_is_needed(tmp_path):
    db = tmp_path / "short.duckdb"
    fill(db, days=100 / 1440)
    r = run(db)
    assert r.returncode == 1
    # the forecast's minimum (30 + 60) and the held-out horizon (60)
    assert r.stderr.strip() == ("cnsched: backtest: 4 series of rtt_ms p95: needs at least 150 steps of history "
                                "(the forecast's minimum and the held-out horizon), has 100")
    bad = run(db, "--stat", "p42")
    assert bad.returncode == 2 and "stat must be one of" in bad.stderr


def test_plot_draws_one_series_with_its_rolling_forecast(tmp_path):
    db = tmp_path / "p.duckdb"
    fill(db, days=3)
    png = tmp_path / "bt.png"
    r = run(db, "--json", "--days", "1", "--plot", str(png), "--series", "n2->hub")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["plot"] == {"file": str(png), "series": "n2->hub"} and "trace" not in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    bad = run(db, "--plot", str(png), "--series", "n9->hub")
    assert bad.returncode == 2 and "--series n9->hub: no such series (known: n0->hub, n1->hub" in bad.stderr
    nowhere = run(db, "--plot", str(tmp_path / "no" / "dir.png"))
    assert nowhere.returncode == 2 and "--plot" in nowhere.stderr and "No such file" in nowhere.stderr


def test_the_trace_is_the_forecast_made_at_each_origin():
    from core.forecast import forecast
    from streams.analytics.backtest import backtest

    day, horizon = 48, 6
    rng = np.random.default_rng(3)
    values = 10 + rng.normal(0, 0.3, (2, 4 * day))
    values[1, -20:] += 5  # a shift inside the last origins
    out = backtest(values, 0.0, 1800.0, horizon, day, days=1.0, trace=1, names=["a", "b"])
    tr = out["trace"]
    assert tr["series"] == "b" and tr["truth"].size == tr["p50"].size == tr["upper"].size == day
    np.testing.assert_array_equal(tr["truth"], values[1, -day:])
    for o in range(3 * day, 4 * day, horizon):  # each origin's forecast from exactly its history
        f = forecast(values[1:2, :o], horizon, day)
        np.testing.assert_allclose(tr["p50"][o - 3 * day:o - 3 * day + horizon], f.p50[0])
        np.testing.assert_allclose(tr["upper"][o - 3 * day:o - 3 * day + horizon], f.upper[0])
