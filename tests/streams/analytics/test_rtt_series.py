"""The labelled RTT traces: the loader against the real files and bad input; the forecaster and the
degradation detector judged on them (accuracy, not time)."""

from pathlib import Path

import numpy as np
import pytest

from streams.analytics.rtt_series import SeriesError, load_dir, load_labelled

RTT = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "rtt" / "artificial_labelled"
needs_data = pytest.mark.skipif(not RTT.is_dir(), reason="../shared/data is not beside this checkout")


def test_both_date_formats_decimal_commas_failed_pings_and_repeated_headers(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("epoch;rtt;cp\n2016-10-13 00:00:00;82,5;0\n13/10/2016 00:04;-1,2;0\nepoch;rtt;cp\n"
                 "2016-10-13 00:12:00;90;1;\n")
    s = load_labelled(str(p))
    assert s.start == 1476316800.0 and s.step_s == 240.0
    assert np.array_equal(s.rtt, [82.5, np.nan, np.nan, 90.0], equal_nan=True)  # gap at 00:08, -1.2: failed
    assert s.change.tolist() == [False, False, False, True]


def test_bad_files_name_the_file_and_line(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("epoch;rtt;cp\n2016-13-45 00:00:00;1;0\n")
    with pytest.raises(SeriesError, match=r"b.csv:2: epoch '2016-13-45 00:00:00' is neither"):
        load_labelled(str(p))
    p.write_text("epoch;rtt;cp\n2016-10-13 00:00:00;abc;0\n")
    with pytest.raises(SeriesError, match=r"b.csv:2: could not convert"):
        load_labelled(str(p))
    p.write_text("epoch;rtt;cp\n")
    with pytest.raises(SeriesError, match="no samples"):
        load_labelled(str(p))
    with pytest.raises(SeriesError, match="no \\*.csv files"):
        load_dir(str(tmp_path / "empty"))


@needs_data
def test_the_real_traces_load():
    series = load_dir(str(RTT))
    assert len(series) == 20 and [s.name for s in series[:3]] == ["1.csv", "2.csv", "3.csv"]
    assert all(s.rtt.size > 5000 and s.change.sum() > 10 for s in series)
    assert sum(int(np.isnan(s.rtt).sum()) for s in series) > 5000  # the failed pings of two traces


@needs_data
def test_forecaster_beats_last_value_on_the_real_traces():
    from streams.dev.bench.forecast import bench_real

    out = bench_real(str(RTT), ets_every_h=10_000)  # AutoETS once per trace at most: accuracy only
    assert out["origins"] > 4000
    assert out["ours_vs_last_value"] < 0.93  # 0.907 measured
    assert out["mase_ours"] < out["mase_seasonal_naive"]


@needs_data
def test_detector_catches_rises_the_doubling_rule_misses_at_fewer_false_alarms():
    from streams.dev.bench.detect import bench_detect

    out = bench_detect(str(RTT))
    assert out["rises"] > 250
    # the target: >= 90 % within two windows at <= 0.05 false alarms per path-day (0.910, 0.033)
    assert out["ours_recall"] >= 0.9 and out["ours_false_alarms_per_path_day"] <= 0.05
    assert out["doubles_recall"] < 0.5 and out["doubles_false_alarms_per_path_day"] > 0.3  # 0.384, 0.423
