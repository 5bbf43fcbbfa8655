"""History read back from a real DuckDB file: forecasts on the midnight-aligned grid, the 409 case,
the preventive overlay and alpha learning from stored decisions and task events."""

import numpy as np
import pytest

from sinks.duckdb_store import DuckStore
from streams.analytics.alphas import learned_alphas
from streams.analytics.forecasts import (
    NotEnoughHistory,
    forecast_path,
    path_series,
    worst_forecasts,
)
from tests.helpers.history import DAY, T0, windows


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "h.duckdb"
    with DuckStore(path) as s:
        s.write_windows(windows("a", "b", 3) + windows("a", "c", 1) + windows("b", "c", 3, level=10.0)
                        + windows("a", "d", 45 / 1440))  # 45 minutes
    return path


def test_series_starts_at_the_midnight_before_its_first_window(db):
    with DuckStore(db, read_only=True) as s:
        values, start = path_series(s.con, "a", "b", "rtt_ms", "mean", 60.0)
    assert start == T0
    assert np.isnan(values[:120]).all() and np.isfinite(values[120:]).all()  # data from 02:00
    assert len(values) == 120 + 3 * 1440


def test_forecast_follows_the_daily_rhythm(db):
    out = forecast_path(db, "a", "b", "rtt_ms", "mean", 60.0, 60)
    assert out["from"] == T0 + (120 + 3 * 1440) * 60.0  # 02:00 on day 3, right after the last window
    want = 1.0 + 0.5 * np.sin(2 * np.pi * (((out["from"] + 60 * np.arange(60)) % DAY) / DAY - 0.5))
    got = np.array([p["value"] for p in out["points"]])
    assert np.abs(got - want).max() < 0.02  # amplitude 0.5: the shape, within 2 % of it


def test_too_little_history_says_how_much_is_needed(db):
    with pytest.raises(NotEnoughHistory) as e:
        forecast_path(db, "a", "d", "rtt_ms", "mean", 60.0, 60)
    # the level's window of 30 steps and one horizon of 60 of its own past errors
    assert (e.value.needed_steps, e.value.have_steps) == (90, 45)
    assert "needs 90 steps of 60 s (1.5 h" in str(e.value)
    with pytest.raises(NotEnoughHistory):
        forecast_path(db, "x", "y", "rtt_ms", "mean", 60.0, 60)  # no history at all


def test_worst_forecast_per_path_with_enough_history(db):
    worst = worst_forecasts(db, "rtt_ms", "p95", 60.0, 30)
    assert set(worst) == {("a", "b"), ("a", "c"), ("b", "c")}  # a -> d has 45 minutes: less than 30 + 30
    # p95 = 1.5 x mean; 02:00-02:30 UTC is near the trough of the sine, the max is at 02:30
    t = T0 + 3 * DAY + 7200 + 60 * np.arange(30)
    want = 1.5 * (1.0 + 0.5 * np.sin(2 * np.pi * ((t % DAY) / DAY - 0.5)))
    assert worst[("a", "b")] == pytest.approx(want.max(), abs=0.02)
    assert worst[("a", "c")] == pytest.approx(worst[("a", "b")], abs=0.3)  # one day: the level, no profile
    # only the last 1.5 days read: a -> c (day 1) has nothing in them
    assert set(worst_forecasts(db, "rtt_ms", "p95", 60.0, 30, days=1.5)) == {("a", "b"), ("b", "c")}


def test_load_series_matrix(db):
    from sinks.queries import load_series

    with DuckStore(db, read_only=True) as s:
        paths, values, first = load_series(s.con, "rtt_ms", "mean", 600)  # 10-minute steps
    assert paths == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c")] and first == T0 + 7200
    assert values.shape == (4, 3 * 144)
    assert np.isnan(values[1, 144:]).all() and np.isfinite(values[1, :144]).all()  # a -> c: one day
    assert values[3, 0] == pytest.approx(10 + 0.5 * np.mean(np.sin(2 * np.pi * ((T0 + 7200 + 60 * np.arange(10))
                                                                                   % DAY / DAY - 0.5))))


def finished_tasks(n, alpha, task_type="fine-tune", seed=7):
    """Decisions and finished events of ``n`` tasks whose throughput follows ``alpha`` exactly."""
    rng = np.random.default_rng(seed)
    c, net = rng.uniform(20, 100, n), rng.uniform(20, 100, n)
    achieved = 100 * (alpha * c + (1 - alpha) * net)
    decisions = [{"task_id": f"t{i}", "decided_at": 10.0 + i, "status": "placed", "nodes": ["n"], "alpha": 0.5,
                  "network_profile": "balanced", "task_type": task_type,
                  "candidates": [{"node": "n", "compute_score": c[i], "network_score": net[i], "alpha": 0.5,
                                  "composite": 0.5 * c[i] + 0.5 * net[i]}], "state_version": 1} for i in range(n)]
    events = [{"task_id": f"t{i}", "event": "finished", "at": 1000.0 + i, "throughput": achieved[i],
               "duration_s": 60.0} for i in range(n)]
    return decisions, events


def test_alpha_learning_recovers_a_planted_alpha_from_stored_outcomes(tmp_path):
    n = 200
    decisions, events = finished_tasks(n, 0.35)  # planted: alpha 0.35
    # a few tasks of another type: reported, but too few to be used
    for i in range(5):
        decisions.append({"task_id": f"s{i}", "decided_at": 5.0, "status": "placed", "nodes": ["n"], "alpha": 0.8,
                          "network_profile": "latency", "task_type": "inference",
                          "candidates": [{"node": "n", "compute_score": 50.0 + i, "network_score": 40.0, "alpha": 0.8,
                                          "composite": 1.0}], "state_version": 1})
        events.append({"task_id": f"s{i}", "event": "finished", "at": 900.0, "throughput": 10.0 + i})
    with DuckStore(tmp_path / "a.duckdb") as s:
        s.write_decisions(decisions)
        s.write_task_events(events)
        rows = {r["task_type"]: r for r in learned_alphas(s.con, {"fine-tune": 0.5, "inference": 0.8}, 50)}
    assert rows["fine-tune"]["learned_alpha"] == pytest.approx(0.35, abs=0.02)
    assert rows["fine-tune"]["tasks"] == n and rows["fine-tune"]["in_use"]
    assert rows["inference"]["tasks"] == 5 and not rows["inference"]["in_use"]


async def test_the_worker_refresh_applies_learned_alphas_and_forecasts(db):
    from core.vocabulary import DEFAULT_TYPES
    from streams.config import Settings
    from streams.metrics import Counters
    from streams.worker.scheduling.history import refresh_history
    from streams.worker.scheduling.state import Scheduler

    decisions, events = finished_tasks(60, 0.35)
    with DuckStore(db) as s:
        s.write_decisions(decisions)
        s.write_task_events(events)
    sched = Scheduler(net=None, inv=None)
    counters = Counters()
    settings = Settings(duckdb_path=db, preventive_reschedule=True, alpha_min_tasks=50, forecast_step_seconds=60)
    await refresh_history(sched, settings, counters)
    assert sched.types["fine-tune"].alpha == pytest.approx(0.35, abs=0.02)
    assert sched.types["inference"] == DEFAULT_TYPES["inference"]  # no history: the default
    # a -> d (45 minutes) is short of the minimum history of the preventive horizon
    assert set(sched.forecast_p95) == {("a", "b"), ("a", "c"), ("b", "c")} and sched.forecast_version == 1
    text = counters.exposition()
    assert 'cnsched_type_alpha{source="learned",type="fine-tune"} 0.35' in text
    assert "cnsched_forecast_paths 3.0" in text
    # with too few tasks the default stays
    sched2 = Scheduler(net=None, inv=None)
    await refresh_history(sched2, settings.model_copy(update={"alpha_min_tasks": 100,
                                                              "preventive_reschedule": False}))
    assert sched2.types["fine-tune"] == DEFAULT_TYPES["fine-tune"] and sched2.forecast_p95 == {}


def test_detector_memory_read_back_from_the_store(db):
    from sinks.queries import recent_windows
    from streams.adapters.network import PathColumns
    from streams.analytics.forecasts import stored_p95s

    with DuckStore(db, read_only=True) as s:
        paths, ends, p95 = recent_windows(s.con, "rtt_ms", "p95", 24, days=1.0)
    # a -> c ended two days before the newest window: outside the last day
    assert paths == [("a", "b"), ("b", "c")]
    last_end = T0 + 7200 + 3 * DAY  # the newest window of a -> b ends here
    np.testing.assert_array_equal(ends[0], last_end - 60 * np.arange(23, -1, -1))  # oldest first
    t = ends[0] - 60  # window starts
    np.testing.assert_allclose(p95[0], 1.5 * (1 + 0.5 * np.sin(2 * np.pi * ((t % DAY) / DAY - 0.5))), rtol=1e-6)
    assert stored_p95s(db, 24)[0] == paths
    # one per 4-minute step: the last window of each (the 60-second windows ending at k x 240 start a step)
    with DuckStore(db, read_only=True) as s:
        spaths, sends, sp95 = recent_windows(s.con, "rtt_ms", "p95", 24, days=1.0, step_s=240.0)
    assert spaths == paths
    np.testing.assert_array_equal(np.diff(np.floor(sends[0] / 240)), np.ones(23))  # 24 steps in a row
    # the last window of each step: the next window (60 s on) is in the next step; the newest is the last one
    full = sends[0][:-1]
    assert sends[0][-1] == last_end and (np.floor((full + 60) / 240) > np.floor(full / 240)).all()
    i = np.searchsorted(ends[0], sends[0][-6:])
    np.testing.assert_array_equal(sp95[0][-6:], p95[0][i])  # the same values as the windows they are

    class Memory24(PathColumns):  # a memory of 24 windows, so that the stored ones overfill it
        HISTORY = 24

    cols = Memory24()
    # the worker already holds two newer windows of a -> b when the stored ones arrive
    for k, end in enumerate((last_end + 60, last_end + 120)):
        cols.set({"src": "a", "dst": "b", "metrics": {"rtt_ms": {"window_start": end - 60, "window_end": end,
                                                                 "p95": 100.0 + k}}})
    added = cols.seed(paths, ends, p95)
    assert added == 22 + 24  # a -> b: room for 22 of its 24 stored windows; b -> c: all 24
    row = cols.rows[(cols.codes["a"], cols.codes["b"])]
    np.testing.assert_allclose(cols.history(np.array([row]))[0], np.r_[p95[0][-22:], 100.0, 101.0], rtol=1e-6)
    assert cols.seed(paths, ends, p95) == 0  # full: seeding again adds nothing
    # a later window still pushes in at the end
    cols.set({"src": "a", "dst": "b", "metrics": {"rtt_ms": {"window_start": last_end + 120, "window_end": last_end + 180,
                                                             "p95": 102.0}}})
    assert cols.history(np.array([row]))[0][-3:].tolist() == [100.0, 101.0, 102.0]
    # the stored windows set where new windows start from
    bc = cols.rows[(cols.codes["b"], cols.codes["c"])]
    assert cols.hist_end[bc] == ends[1][-1]


async def test_the_worker_seeds_its_detector_at_start_and_after_a_rebuild(db):
    from streams.config import Settings
    from streams.metrics import Counters
    from streams.worker.scheduling.history import seed_detector
    from streams.worker.scheduling.state import Scheduler
    from streams.worker.state_tables import NetState

    net = NetState({})  # the view over an (empty) recovered table
    sched = Scheduler(net=net, inv=None)
    counters = Counters()
    from streams.adapters.network import PathColumns

    full = 2 * PathColumns.HISTORY  # a -> b, b -> c: a full memory each (the store holds more)
    assert await seed_detector(sched, Settings(duckdb_path=db), counters) == full
    assert f"cnsched_detector_seeded_windows {full:.1f}" in counters.exposition()
    rows = np.arange(net.columns().n)
    assert np.isfinite(net.columns().history(rows)).all()
    net.invalidate()  # recovery after a rebalance rebuilds the columns: the stored windows come back
    assert np.isfinite(net.columns().history(np.arange(net.columns().n))).all()
