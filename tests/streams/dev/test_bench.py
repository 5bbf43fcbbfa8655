"""`cnsched bench ingest` runs ours beside the baseline in one run and reports the contract keys
(the figures themselves are for the note, not asserted: these machines are shared and noisy)."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_bench_ingest_reports_the_contract_keys(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_DATA_DIR"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "streams.cli", "bench", "ingest", "--samples", "20000",
         "--baseline-samples", "300", "--sources", "5", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["samples"] == 20000 and out["baseline_samples"] == 300
    for key in ("end_to_end_samples_per_s", "baseline_samples_per_s", "kernel_samples_per_s"):
        assert out[key] > 0, key
    assert out["ratio_end_to_end_vs_baseline"] == pytest.approx(
        out["end_to_end_samples_per_s"] / out["baseline_samples_per_s"])


def test_bench_scoring_and_reschedule_report_their_keys():
    from streams.dev.bench.reschedule import bench_reschedule
    from streams.dev.bench.scoring import bench_scoring

    s = bench_scoring(jobs=50, nodes=40, endpoints=8)
    for key in ("jobs", "nodes", "numba_full_rescore_s", "numba_pairs_per_s", "numpy_pairs_per_s",
                "python_pairs_per_s", "numba_parts_s"):
        assert s[key] > 0, key
    r = bench_reschedule(nodes=40, peers=3, tasks=20, stores=4)
    assert r["moved_t0"] and r["reschedule_events"] >= 1  # the task whose path degraded moved
    assert r["running_tasks"] == 20 and r["window_to_reschedule_s"] > 0


def test_bench_battery_runs_both_targets_beside_the_reference():
    from streams.dev.bench.battery import bench_battery

    out = bench_battery(samples=2000, window=15)
    for kind in ("block", "trailing"):
        assert out[f"{kind}_seconds"] > 0 and out[f"{kind}_reference_seconds"] > 0
        assert out[f"{kind}_ratio"] == pytest.approx(out[f"{kind}_reference_seconds"] / out[f"{kind}_seconds"])


def test_bench_forecast_puts_ours_beside_last_value_seasonal_naive_and_autoets(tmp_path):
    r = subprocess.run([sys.executable, "-m", "streams.cli", "bench", "forecast", "--series", "30", "--days", "5",
                        "--ets-series", "2", "--no-real", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    d = out["diurnal"]
    assert d["series"] == 30 and d["autoets_series"] == 2 and "real_rtt" not in out
    assert d["mase_ours"] < d["mase_last_value"] and d["mase_ours"] < d["mase_seasonal_naive"]
    for args, says in ((["--rtt-dir", str(tmp_path / "x")], "not a directory"), (["--rtt-dir", str(tmp_path)], "no *.csv")):
        bad = subprocess.run([sys.executable, "-m", "streams.cli", "bench", "forecast", "--series", "2", *args],
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and says in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
