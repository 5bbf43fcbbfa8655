"""Bounded storage on a real DuckDB file (sinks/retention.py): raw windows roll up to minutes, minutes
to hours, the oldest go; the file stops growing after the retention period; forecasts still work on
roll-ups; a roll-up's figures worked by hand; late windows merge; a rerun changes nothing."""

import numpy as np
import pytest

from sinks.duckdb_store import DuckStore
from sinks.retention import Retention, compact, copy_due, copy_fresh
from streams.analytics.forecasts import forecast_path
from tests.helpers.history import DAY, T0, windows


def raw(src, dst, start, n, step=10.0, mean=1.0, kept=10):
    return [{"src": src, "dst": dst, "metric": "rtt_ms", "window_start": start + k * step,
             "window_end": start + (k + 1) * step, "count": kept, "kept": kept, "outliers": 0, "lost": 0,
             "mean": mean, "p50": mean, "p95": mean, "p99": mean, "min": mean, "max": mean} for k in range(n)]


def test_a_minute_is_its_windows_weighted_by_kept_samples_and_late_windows_merge(tmp_path):
    t = T0  # a minute boundary
    rows = [{**r, "mean": float(i + 1), "p95": 2.0 * (i + 1), "kept": i + 1, "count": i + 2, "lost": 1,
             "min": float(i), "max": float(10 + i)} for i, r in enumerate(raw("a", "b", t, 6))]
    with DuckStore(tmp_path / "r.duckdb") as s:
        s.write_windows(rows)
        done = compact(s.con, t + 8 * DAY, Retention(raw_days=1, minute_days=30, hour_days=60))
        assert done["minute_buckets"] == 1
        got = s.query("SELECT window_start, window_end, count, kept, lost, mean, p95, min, max FROM windows")
        # kept 1..6 (21 in all), means 1..6: sum(i * i) / 21 = 91 / 21; count 2..7 -> 27; lost 6
        assert got == [(t, t + 60, 27, 21, 6, pytest.approx(91 / 21), pytest.approx(182 / 21), 0.0, 15.0)]
        again = compact(s.con, t + 8 * DAY, Retention(raw_days=1, minute_days=30, hour_days=60))
        assert again["minute_buckets"] == 0 and s.query("SELECT count(*) FROM windows") == [(1,)]
        # a late window of that minute (kept 21, mean 10) merges: (91 / 21 x 21 + 10 x 21) / 42 = 301 / 42
        s.write_windows(raw("a", "b", t + 30, 1, mean=10.0, kept=21))
        compact(s.con, t + 8 * DAY, Retention(raw_days=1, minute_days=30, hour_days=60))
        assert s.query("SELECT count(*), any_value(kept), any_value(mean), any_value(max) FROM windows") == [
            (1, 42, pytest.approx(301 / 42), 15.0)]


def test_the_file_stops_growing_after_the_retention_period(tmp_path):
    # two paths, 10-s windows, a simulated day at a time; raw 2 days, minutes to day 4, hours to day 8
    keep = Retention(raw_days=2, minute_days=4, hour_days=8)
    counts = []
    with DuckStore(tmp_path / "r.duckdb") as s:
        for day in range(12):
            start = T0 + day * DAY
            s.write_windows(raw("a", "b", start, 8640) + raw("a", "c", start, 8640))
            compact(s.con, start + DAY, keep)
            s.con.execute("CHECKPOINT")
            counts.append(s.query("SELECT count(*) FROM windows")[0][0])
        by_res = dict(s.query("SELECT window_end - window_start, count(*) FROM windows GROUP BY 1"))
    # from day 8 on: 2 days raw (8,640 a day), 2 days of minutes (1,440), 4 of hours (24), per path
    steady = 2 * (2 * 8640 + 2 * 1440 + 4 * 24)
    assert counts[7:] == [steady] * 5 and counts[0] == 2 * 8640 and max(counts) == steady
    assert by_res == {10.0: 2 * 2 * 8640, 60.0: 2 * 2 * 1440, 3600.0: 2 * 4 * 24}


def test_forecasts_read_the_roll_ups(tmp_path):
    db = tmp_path / "h.duckdb"
    with DuckStore(db) as s:
        s.write_windows(windows("a", "b", 3))
    before = forecast_path(db, "a", "b", "rtt_ms", "mean", 60.0, 60)
    with DuckStore(db) as s:  # every window older than a day becomes a minute row, older than two an hour's
        compact(s.con, T0 + 7200 + 3 * DAY, Retention(raw_days=1, minute_days=2, hour_days=30))
        assert dict(s.query("SELECT window_end - window_start, count(*) FROM windows GROUP BY 1")) == {
            60.0: 2 * 1440, 3600.0: 24}
    after = forecast_path(db, "a", "b", "rtt_ms", "mean", 60.0, 60)
    a = np.array([p["value"] for p in after["points"]])
    b = np.array([p["value"] for p in before["points"]])
    assert after["from"] == before["from"] and np.abs(a - b).max() < 0.05  # the daily shape, amplitude 0.5


def test_reports_thin_to_the_last_of_each_hour_and_bad_settings_are_refused(tmp_path):
    with DuckStore(tmp_path / "r.duckdb") as s:
        s.write_compute_reports([{"node": "n1", "ts": T0 + k * 600.0, "cards": 8, "free": {"cards": k % 8}}
                                 for k in range(12)])  # every 10 minutes for two hours
        done = compact(s.con, T0 + 2 * DAY, Retention(raw_days=1, minute_days=2, hour_days=3))
        assert done["reports_thinned"] == 10
        assert s.query("SELECT ts FROM compute_reports ORDER BY ts") == [(T0 + 3000.0,), (T0 + 6600.0,)]
        compact(s.con, T0 + 4 * DAY, Retention(raw_days=1, minute_days=2, hour_days=3))
        assert s.query("SELECT count(*) FROM compute_reports") == [(0,)]
    with pytest.raises(ValueError, match="retention must grow"):
        Retention(raw_days=10, minute_days=5).check()


def test_a_fresh_copy_holds_the_live_rows_only_and_is_due_at_half_again(tmp_path):
    assert not copy_due(150, 100) and copy_due(151, 100) and copy_due(1, None)
    path = tmp_path / "r.duckdb"
    with DuckStore(path) as s:
        for k in range(10):  # three days of ten paths
            s.write_windows(raw("a", f"b{k}", T0, 8640 * 3))
        compact(s.con, T0 + 10 * DAY, Retention(raw_days=1, minute_days=2, hour_days=30))
        s.con.execute("CHECKPOINT")
        before = path.stat().st_size
        size = copy_fresh(s.con, tmp_path / "fresh.duckdb")
    assert size < before / 4  # 259,200 raw rows became 720 hour rows; the old file keeps their blocks
    with DuckStore(tmp_path / "fresh.duckdb") as c:
        assert c.query("SELECT count(*), sum(kept) FROM windows") == [(720, 10 * 10 * 8640 * 3)]
        assert c.write_windows(raw("a", "b", T0, 1)) == 1  # keys and schema came along: a new raw row fits
