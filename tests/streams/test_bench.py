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
