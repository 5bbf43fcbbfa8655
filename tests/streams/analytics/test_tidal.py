"""Tidal lending's demand forecast from the DuckDB audit (streams/analytics/tidal.py)."""

import numpy as np
import pytest

from sinks.duckdb_store import DuckStore
from streams.analytics.tidal import team_demand, tidal_forecasts


def dec(task, at, status, cards, team="serving"):
    return {"task_id": task, "decided_at": at, "status": status, "nodes": ["n"], "alpha": 0.5,
            "network_profile": "balanced", "cards": cards, "peers": 1, "team": team, "candidates": [],
            "state_version": 1}


def test_demand_is_the_cards_held_from_placement_to_finish_or_preemption(tmp_path):
    with DuckStore(tmp_path / "t.duckdb") as s:
        s.write_decisions([dec("a", 0.0, "placed", 8), dec("b", 300.0, "placed", 4), dec("b", 900.0, "preempted", 4),
                           dec("b", 1200.0, "placed", 4), dec("x", 0.0, "placed", 100, team="other")])
        s.write_task_events([{"task_id": "a", "event": "finished", "at": 600.0, "duration_s": 600.0}])
        values, first = team_demand(s.con, "serving", 300.0, 0.0, 1800.0)
    # steps from 0 s: a 8; a + b 12; b 4 (a finished at 600); 0 (b preempted at 900); b again 4, 4
    assert first == 0.0 and values.tolist() == [8, 12, 4, 0, 4, 4]


def test_the_forecast_sees_the_daily_peak_coming(tmp_path):
    day, step = 86_400.0, 600.0
    t0 = 1_764_374_400.0  # a UTC midnight
    decisions, events = [], []
    # 4 days: 4 cards all day, 16 from 12:00 to 16:00 (an inference peak), in 10-minute tasks; the
    # forecasts read what was known by their time
    for k, t in enumerate(np.arange(t0, t0 + 4 * day, step)):
        cards = 16 if 12 * 3600 <= (t - t0) % day < 16 * 3600 else 4
        decisions.append(dec(f"i{k}", float(t), "placed", cards))
        events.append({"task_id": f"i{k}", "event": "finished", "at": float(t + step), "duration_s": step})
    path = tmp_path / "f.duckdb"
    with DuckStore(path) as s:
        s.write_decisions(decisions)
        s.write_task_events(events)
    # at 11:30 on day 4 the next 30 minutes hold no peak; at 11:45 the peak (12:00) is within the lead
    calm = tidal_forecasts(path, ["serving", "nobody"], step, 1800.0, t0 + 3 * day + 11.5 * 3600 - step)
    assert set(calm) == {"serving"} and calm["serving"] < 8
    near = tidal_forecasts(path, ["serving"], step, 3600.0, t0 + 3 * day + 11.5 * 3600)
    assert near["serving"] == pytest.approx(16, abs=2)
