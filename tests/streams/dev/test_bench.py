"""`cnsched bench ingest` runs ours beside the baseline in one run and reports the contract keys
(the figures themselves are for the note, not asserted: these machines are shared and noisy)."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.data import needs_data

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


def test_bench_netstate_writes_each_path_once_per_step_and_ends_with_the_same_records():
    from streams.dev.bench.netstate import METRICS, bench_netstate

    r = bench_netstate(paths=300, step=40)  # 10 paths' four metrics per step
    assert r["messages"] == 300 * len(METRICS) and r["same_records"]
    assert r["one_by_one_table_writes"] == r["messages"] and r["steps_table_writes"] == 300
    assert r["one_by_one_per_s"] > 0 and r["steps_per_s"] > 0


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


def test_bench_replay_reads_each_policys_wall_and_compares_results_without_walls_or_paths():
    from pathlib import Path

    from streams.dev.bench.replay import policy_walls, results_of

    assert policy_walls("replay ...\n  topology seed 0: 122.4 s\n  ours seed 0: 350.2 s\nwarning: x seed 1: s\n") == \
        {"topology": 122.4, "ours": 350.2}
    ours = "replay of 40 philly jobs at a, b (12.5 s)\nconfig: series from /work/shared/data/rtt\n  ours  all  40  1,234\n"
    old = "replay of 40 philly jobs at a, b (13.0 s)\nconfig: series from /tmp/x/shared/data/rtt\n  ours  all  40  1,234\n"
    assert results_of(ours, Path("/work/shared")) == results_of(old, Path("/tmp/x/shared"))
    assert results_of(ours, Path("/work/shared")) != results_of(old.replace("1,234", "1,235"), Path("/tmp/x/shared"))
    assert "(12.5 s)" not in results_of(ours, Path("/work/shared"))


@needs_data  # the replay reads the Philly trace and the RTT series from ../shared/data
def test_bench_replay_runs_an_older_revision_beside_ours_with_the_same_results():
    """The revision beside ours is this one (HEAD, from a worktree): the results must be identical —
    a worktree's other data path or the wall times must not count as a difference."""
    out = _bench_beside_head("replay", "--limit", "30", "--policies", "topology", "--workers", "1")
    assert out["results_identical"] is True and out["jobs_limit"] == 30
    assert out["ours_topology_s"] > 0 and out["HEAD_topology_s"] > 0
    assert out["topology_ratio_baseline_over_ours"] == pytest.approx(out["HEAD_topology_s"] / out["ours_topology_s"])


def test_bench_decide_beside_a_revision_runs_both_and_says_where_the_time_goes():
    """The revision beside ours is this one (HEAD, from a worktree): the same decisions, both rates
    measured and their ratio the one printed; where the time goes covers the whole burst, gangs among
    the steps (a fifth of the bench's tasks are gangs)."""
    got = _bench_beside_head("decide", "--nodes", "64", "--tasks", "30", "--rounds", "1")["nodes_64"]
    assert got["same_decisions"] is True and got["ours_placed"] == got["HEAD_placed"] > 0
    assert got["ratio_ours_over_baseline"] == pytest.approx(got["ours_per_s"] / got["HEAD_per_s"], abs=0.01)
    shares = got["where_ours_goes"]
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01) and all(0 <= v <= 1 for v in shares.values())
    assert shares["gang placed in seconds"] > 0 and shares["decision record"] > 0


def test_bench_netstate_beside_a_revision_runs_both_and_compares_the_records():
    """The step of ours beside this revision's (HEAD, from a worktree): both rates measured, their ratio
    the one printed, and the same records in the table after it."""
    got = _bench_beside_head("netstate", "--paths", "400", "--step", "40", "--rounds", "1")
    assert got["same_records"] is True and got["messages"] == 1600 and got["ours_per_s"] > 0 and got["HEAD_per_s"] > 0
    assert got["ratio_ours_over_baseline"] == pytest.approx(got["ours_per_s"] / got["HEAD_per_s"], abs=0.01)


def _bench_beside_head(bench: str, *args: str) -> dict:
    """``cnsched bench BENCH --baseline-rev HEAD ARGS --json`` in a process of its own (no CNSCHED_
    settings of the test run), its JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    r = subprocess.run([sys.executable, "-m", "streams.cli", "bench", bench, "--baseline-rev", "HEAD", *args, "--json"],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)
