"""`cnsched battery`: the same figures from arguments, a CSV file and stdin; a PNG chart; one clear line
and exit 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

KWH_PER_MW_MIN = 1000 / 60


def battery(*args, stdin=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    return subprocess.run([sys.executable, "-m", "streams.cli", "battery", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120)


def test_arguments_csv_file_and_stdin_give_the_same_answer(tmp_path):
    load = [10, 20, 30, 10]
    by_args = battery(*map(str, load), "--window", "2", "--json")
    assert by_args.returncode == 0, by_args.stderr
    got = json.loads(by_args.stdout)
    # worked example (tests/core/test_battery.py): block means 15, 20
    assert got["target_mw"] == [15, 15, 20, 20] and got["compensation_mw"] == [-5, 5, 10, -10]
    assert got["power_capacity_mw"] == pytest.approx(12)
    assert got["discharge_energy_kwh"] == pytest.approx(15 * KWH_PER_MW_MIN)
    assert got["charge_energy_kwh"] == pytest.approx(10 * KWH_PER_MW_MIN)
    assert got["soc_swing_kwh"] == pytest.approx(15 * KWH_PER_MW_MIN)
    assert got["recommended_energy_kwh"] == pytest.approx(15 * KWH_PER_MW_MIN * 1.2 / 0.9)
    assert (got["original_max_ramp_mw_per_min"], got["smoothed_max_ramp_mw_per_min"]) == (20, 5)
    assert got["smoothing_rate_pct"] == pytest.approx(75)

    csv = "ts,site,power_mw\n" + "".join(f"{60 * i},dc1,{v}\n" for i, v in enumerate(load))
    f = tmp_path / "load.csv"
    f.write_text(csv)
    from_file = battery(str(f), "--window", "2min", "--interval", "1min", "--json")
    from_stdin = battery("-", "--window", "2", "--json", stdin=csv)
    assert json.loads(from_file.stdout) == got == json.loads(from_stdin.stdout)
    bare = battery("-", "--window", "2", "--json", stdin="10\n20\n\n30\n# a comment\n10\n")
    assert json.loads(bare.stdout) == got


def test_trailing_and_ramp_limit_options():
    out = json.loads(battery("10", "20", "30", "10", "--window", "2", "--interval", "30s", "--trailing",
                             "--ramp-limit", "10", "--margin", "1.5", "--dod", "0.8", "--json").stdout)
    assert out["target_mw"] == [10, 15, 25, 20] and out["target"] == "trailing"
    assert out["smoothed_max_ramp_mw_per_min"] == 10 and out["smoothing_rate_pct"] == pytest.approx(75)
    assert out["target_max_ramp_mw_per_min"] == 20 and out["ramp_limit_met"] is False
    assert out["power_capacity_mw"] == pytest.approx(15)


def test_table_and_png(tmp_path):
    png = tmp_path / "b.png"
    r = battery("10", "20", "30", "10", "--window", "2", "--plot", str(png))
    assert r.returncode == 0
    assert "power capacity          12.000 MW" in r.stdout and "smoothing rate          75.0 %" in r.stdout
    from matplotlib.image import imread

    img = imread(png)[..., :3]
    assert img.shape[:2] == (450, 1000)

    def has(rgb):  # matplotlib's tab:blue (load) and tab:orange (target) lines are drawn
        return (np.abs(img - np.array(rgb) / 255).max(axis=-1) < 0.02).sum() > 50

    assert has((31, 119, 180)) and has((255, 127, 14)) and has((44, 160, 44))


@pytest.mark.parametrize("args,stdin,msg", [
    (["10", "20", "--window", "3"], None, "fewer than one window"),
    (["10", "nan", "30", "--window", "1"], None, "sample 2 is nan"),
    (["-", "--window", "1"], "power_mw\n5\n-1\n", "sample 2 is -1"),
    (["10", "20", "--window", "1", "--interval", "0s"], None, "greater than zero"),
    (["10", "20", "--window", "1", "--interval", "fast"], None, "is not a duration"),
    (["-", "--window", "1"], "power_mw\n5\nabc\n", "line 3: 'abc' is not a number"),
    (["--window", "1"], None, "give power values"),
    (["10", "20"], None, "--window"),
])
def test_bad_input_exits_2_with_one_line(args, stdin, msg):
    r = battery(*args, stdin=stdin)
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
