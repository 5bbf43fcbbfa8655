"""The labelled RTT traces: the loader against the real files and bad input; the forecaster and the
degradation detector judged on them (accuracy, not time)."""


import numpy as np
import pytest

from streams.analytics.rtt_series import SeriesError, load_dir, load_labelled
from tests.helpers.data import DATA, needs_data

RTT = DATA / "rtt" / "artificial_labelled"


def test_both_date_formats_decimal_commas_failed_pings_and_repeated_headers(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("epoch;rtt;cp\n2016-10-13 00:00:00;82,5;0\n13/10/2016 00:04;-1,2;0\nepoch;rtt;cp\n"
                 "2016-10-13 00:12:00;90;1;\n")
    s = load_labelled(str(p))
    assert s.start == 1476316800.0 and s.step_s == 240.0
    assert np.array_equal(s.rtt, [82.5, np.nan, np.nan, 90.0], equal_nan=True)  # gap at 00:08, -1.2: failed
    assert s.change.tolist() == [False, False, False, True]


def test_the_fast_epoch_parse_agrees_with_strptime():
    """The day parsed once per date, the clock by hand: the same seconds as strptime, the same refusals."""
    from datetime import datetime, timezone

    from streams.analytics.rtt_series import _epoch

    def reference(text):
        for fmt in ("%Y-%m-%d %H:%M:%S", "%d/%m/%Y %H:%M"):
            try:
                return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
            except ValueError:
                pass
        return "refused"

    rng = np.random.default_rng(3)
    texts = ["2016-10-13 24:00:00", "2016-02-30 01:00:00", "2016-10-13 01:48", "14/10/2016 21:17:00",
             "1/2/2016 3:04", "2016-10-13 01:48:60", "2016-10-13 1:48:56", "2016-10-13 01:4x:56", "", "2016-10-13"]
    for _ in range(400):
        y, mo, d, h, mi, sec = 2014 + rng.integers(0, 6), *rng.integers(1, [13, 32, 25, 61, 62])
        texts += [f"{y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{sec:02d}", f"{d:02d}/{mo:02d}/{y} {h:02d}:{mi:02d}"]
    for text in texts:
        try:
            got = _epoch(text)
        except ValueError:
            got = "refused"
        assert got == reference(text), text
    assert _epoch("14/10/2016 21:17") == 1476479820.0  # worked: 2016-10-14 is day 17088, + 21 h 17 min


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


REAL = RTT.parent / "real_labelled"


@needs_data
def test_detector_on_real_and_artificial_traces():
    from streams.dev.bench.detect import bench_detect

    real = bench_detect(str(REAL))
    ours, median = real["ours"], real["median"]
    assert ours["events"] == median["events"] == 28
    # (2026-12-02, issue 31's second pass: 0.786 within two windows, 0.929 within the hour, 0.039 strict
    # false alarms per path-day, 0.571 of the rises that start from a quiet path, 1.5 % of the time on)
    assert ours["recall_2_windows"] >= 0.75 and ours["recall_1_hour"] >= 0.9
    assert ours["strict_false_alarms_per_path_day"] <= 0.05 and ours["alarm_time_share"] <= 0.02
    # the median rule it replaced: 0.464 and 0.086 — ours catches more and pages less, both ways of counting,
    # and not only by being on already (0.571 against 0.464 of the rises from a quiet path)
    assert ours["recall_2_windows"] >= median["recall_2_windows"] + 0.25
    assert ours["recall_2_windows_from_quiet"] >= median["recall_2_windows_from_quiet"] + 0.07
    assert ours["strict_false_alarms_per_path_day"] < median["strict_false_alarms_per_path_day"]
    assert ours["false_alarms_per_path_day"] < median["false_alarms_per_path_day"]
    assert real["doubles"]["recall_2_windows"] < 0.1  # "latency doubles" misses nearly every real rise
    art = bench_detect(str(RTT))["ours"]
    assert art["events"] > 250
    # the artificial set holds (0.875, 0.022): >= 85 % at <= 0.05
    assert art["recall_2_windows"] >= 0.85 and art["strict_false_alarms_per_path_day"] <= 0.05


def test_scoring_worked_example():
    from streams.dev.bench.detect import score

    step = 240.0  # 15 windows an hour, 30 in two hours
    changes = np.zeros(200, bool)
    changes[[50, 120]] = True
    alarm = np.zeros(200, bool)
    alarm[51:54] = True  # caught: the change point's next window
    alarm[125:127] = True  # 5 windows after a change point (not an event): neither false alarm
    alarm[160:162] = True  # 40 windows after it: strict false alarm; bench false alarm with a memory < 40
    alarm[10] = True  # before anything: false both ways
    t = score(alarm, [50, 120], changes, memory=20, step_s=step)
    # 120 is not caught within two windows (its alarm is 5 windows later), but within the hour
    assert (t.events, t.caught, t.caught_hour) == (2, 1, 2)
    t2 = score(alarm, [50, 100], changes, memory=20, step_s=step)  # an event at 100: no alarm within the hour
    assert (t2.caught, t2.caught_hour, t2.delays) == (1, 1, [1])
    assert t.false_bench == 2 and t.false_strict == 2  # windows 10 and 160
    assert t.delays == [1, 5] and t.days == pytest.approx(200 * 240 / 86400)
    assert (t.alarm_windows, t.windows, t.already_on) == (8, 200, 0)  # 3 + 2 + 2 + 1 windows alarmed
    early = alarm.copy()
    early[49] = True  # on at the window before the change point at 50: caught, but already in an incident
    t3 = score(early, [50, 120], changes, memory=20, step_s=step)
    assert (t3.already_on, t3.caught, t3.caught_fresh) == (1, 1, 0)
    assert t.caught_fresh == 1
    assert score(alarm, [], changes, memory=50, step_s=step).false_bench == 1  # 160 is 40 after a change


@needs_data
def test_cross_validation_adds_up_the_held_out_folds():
    import dataclasses

    from core.detect import DEFAULT_POLICY
    from streams.dev.bench.detect import run_rule
    from streams.dev.bench.detect_cv import cross_validate

    series = load_dir(str(REAL))
    out = cross_validate(series, folds=5, target=0.08, grid={"factor": (1.25, 3.0)})
    assert out["policies"] == 2 and len(out["fold"]) == 5
    # factor 3 catches nothing on these traces: every fold picks 1.25, and the held-out folds add up
    # to the whole set's figures for it
    assert all(f["policy"] == {"factor": 1.25} for f in out["fold"].values())
    whole = run_rule(series, dataclasses.replace(DEFAULT_POLICY, factor=1.25), 1.2)[0].summary(240.0)
    assert out["held_out"] == whole
    assert sum(f["held_out"]["events"] for f in out["fold"].values()) == 28


@needs_data
def test_the_threshold_choice_holds_on_files_it_never_saw():
    from streams.dev.bench.detect_cv import cross_validate

    real = load_dir(str(REAL))
    out = cross_validate(real, target=0.05, second=load_dir(str(RTT)))
    held = out["held_out"]
    # (2026-12-02: 0.750 within two windows, 0.929 within the hour, 0.041 strict false alarms per path-day)
    assert held["recall_2_windows"] >= 0.7 and held["recall_1_hour"] >= 0.85
    assert held["strict_false_alarms_per_path_day"] <= 0.05 and held["alarm_time_share"] <= 0.02
    # the in-sample best of the same grid is the ceiling of the choice: 0.821 at 0.049 (issue 31's 90 % is not in it)
    assert held["recall_2_windows"] <= out["in_sample_best"]["recall_2_windows"] < 0.9
    assert 0 < out["holding_the_second_set"] < out["policies"]


@needs_data
def test_the_files_read_at_once_are_the_files_read_line_by_line(tmp_path):
    """load_labelled parses regular files in one numpy call (_regular): shared series of both sets
    (real: DD/MM/YYYY HH:MM, artificial: YYYY-MM-DD HH:MM:SS) give what reading line by line gives,
    value for value; an irregular line (a single-digit hour, which strptime reads) goes line by line."""
    from streams.analytics.rtt_series import _line_by_line, _regular

    files = [str(p) for d in ("real_labelled", "artificial_labelled") for p in sorted((DATA / "rtt" / d).glob("*.csv"))[:4]]
    assert len(files) == 8
    for path in files:
        fast, slow = load_labelled(path), _line_by_line(path, 240.0)
        assert fast.start == slow.start and fast.name == slow.name
        np.testing.assert_array_equal(fast.rtt, slow.rtt, err_msg=path)
        np.testing.assert_array_equal(fast.change, slow.change, err_msg=path)
    p = tmp_path / "odd.csv"
    p.write_text("epoch;rtt;cp\n14/10/2016 9:17;1,5;0\n2016-10-14 21:21:00;;1\n")
    assert _regular(p.read_text().splitlines()[1:]) is None
    s = load_labelled(str(p))
    assert s.start == 1476479820.0 - 12 * 3600 and np.isnan(s.rtt[-1]) and s.change[-1] and s.rtt[0] == 1.5
