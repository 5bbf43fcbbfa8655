"""`cnsched report cost` on a hand-made audit, every figure worked out below."""

import calendar

import pytest

from sinks.cost import cost_sections
from sinks.duckdb_store import DuckStore
from sinks.queries import run_sections

T0 = calendar.timegm((2026, 10, 31, 23, 0, 0))  # 2026-10-31 23:00 UTC: an hour before November
PRICES = {"h100": 4.0, "*": 1.0}  # per card-hour
ENERGY = 50.0  # per MWh where a node reports none
IDLE = 0.5


def report(node, ts, zone, klass, power_kw, free, price=None):
    doc = {"node": node, "ts": ts, "zone": zone, "accel_class": klass, "cards": 8, "power_kw": power_kw,
           "free": {"cards": free}}
    if price is not None:
        doc["energy_price_per_mwh"] = price
    return doc


def placed(task, team, typ, cards, node, at):
    return {"task_id": task, "decided_at": at, "status": "placed", "nodes": [node], "alpha": 0.5,
            "network_profile": "balanced", "state_version": 1, "task_type": typ, "submitted_at": at, "cards": cards,
            "peers": 1, "team": team}


def ev(task, event, at, node=None, duration=None, throughput=None):
    return {"task_id": task, "event": event, "at": at, "nodes": [node] if node else [], "duration_s": duration,
            "throughput": throughput}


@pytest.fixture
def sections(tmp_path):
    with DuckStore(tmp_path / "c.duckdb") as store:
        store.write_compute_reports([
            report("h1", T0 - 90_000, "dc1", "h100", 10.0, 8, price=100.0), report("h1", T0, "dc1", "h100", 10.0, 8, 100.0),
            report("h1", T0 + 3600, "dc1", "h100", 10.0, 4, 100.0), report("h1", T0 + 7200, "dc1", "h100", 10.0, 8, 100.0),
            report("a1", T0 - 10, "dc2", "a100", 6.0, 8), report("a1", T0 + 5400, "dc2", "a100", 6.0, 8)])
        store.write_decisions([
            placed("t0", "red", "training-data-parallel", 2, "h1", T0 - 86_400),
            placed("t1", "red", "training-data-parallel", 4, "h1", T0 + 3600),
            placed("t2", "blue", "inference", 2, "a1", T0)])
        store.write_task_events([
            ev("t0", "started", T0 - 86_400, "h1"), ev("t0", "finished", T0 - 86_400 + 1800, duration=1800),
            ev("t1", "started", T0 + 3600, "h1"), ev("t1", "finished", T0 + 7200, duration=3600, throughput=10.0),
            ev("t2", "started", T0, "a1"), ev("t2", "started", T0 + 1800, "h1"),  # moved to h1 after 30 min
            ev("t2", "finished", T0 + 5400, duration=5400, throughput=2.0)])
        out = run_sections(store.con, cost_sections(PRICES, ENERGY, IDLE))
    return [[dict(zip(s["columns"], r, strict=True)) for r in s["rows"]] for s in out]


def test_cost_by_task(sections):
    by_task = {r["task_id"]: r for r in sections[0]}
    # t1: 1 h x 4 cards of an h100 at 4.0 = 16; 10 kW x 4/8 x 1 h = 5 kWh at 100/MWh = 0.5; 36,000 units of work
    t1 = by_task["t1"]
    assert (t1["card_h"], t1["card_cost"], t1["kwh"], t1["energy_cost"], t1["cost"]) == (4.0, 16.0, 5.0, 0.5, 16.5)
    assert t1["cost_per_1k_units"] == pytest.approx(16.5 / 36.0, abs=1e-6) and t1["month"] == "2026-11"
    # t2: 0.5 h x 2 cards on a1 (a100: the * price, 1.0; 6 kW x 2/8 x 0.5 h = 0.75 kWh at the default 50)
    #     + 1 h x 2 cards on h1 (2 x 4.0 = 8; 10 kW x 2/8 x 1 h = 2.5 kWh at 100) after its move
    t2 = by_task["t2"]
    assert (t2["card_h"], t2["card_cost"], t2["kwh"]) == (3.0, 9.0, 3.25)
    assert t2["energy_cost"] == pytest.approx(0.0375 + 0.25) and t2["cost"] == pytest.approx(9.2875)
    assert t2["nodes"] == "a1,h1" and t2["cost_per_1k_units"] == pytest.approx(9.2875 / 10.8, abs=1e-6)
    # t0: 0.5 h x 2 cards of an h100 = 4; 10 kW x 2/8 x 0.5 h = 1.25 kWh at 100 = 0.125; it reported no work
    assert by_task["t0"]["cost"] == 4.125 and by_task["t0"]["cost_per_1k_units"] is None
    assert [r["task_id"] for r in sections[0]] == ["t1", "t2", "t0"]  # dearest first


def test_cost_by_team_and_type_month_over_month(sections):
    teams = {(r["team"], r["month"]): r for r in sections[1]}  # costs to the cent, half away from zero
    assert teams[("red", "2026-10")]["cost"] == 4.13 and teams[("red", "2026-10")]["change_vs_previous_month_pct"] is None
    # red: 4.125 in October, 16.5 in November: +300 %
    assert teams[("red", "2026-11")]["cost"] == 16.5 and teams[("red", "2026-11")]["change_vs_previous_month_pct"] == 300.0
    assert teams[("blue", "2026-10")]["cost"] == 9.29 and len(teams) == 3  # both of t2's segments began in October
    types = {(r["task_type"], r["month"]): r["cost"] for r in sections[2]}
    assert types == {("inference", "2026-10"): 9.29, ("training-data-parallel", "2026-10"): 4.13,
                     ("training-data-parallel", "2026-11"): 16.5}


def test_idle_draw_by_site_and_month(sections):
    idle = {(r["site"], r["month"]): (r["idle_kwh"], r["idle_energy_cost"]) for r in sections[3]}
    # h1 (10 kW, half of it idle): 8 free cards for 25 h, counted 1 h (a report says nothing after an hour),
    # then 8 free for 1 h: 5 + 5 kWh in October; 4 of 8 free for 1 h: 2.5 kWh in November; at 100/MWh
    assert idle[("dc1", "2026-10")] == (10.0, 1.0) and idle[("dc1", "2026-11")] == (2.5, 0.25)
    # a1 (6 kW): 8 free for 1.5 h, counted 1 h: 3 kWh at the default 50/MWh
    assert idle[("dc2", "2026-10")] == (3.0, 0.15) and len(idle) == 3


def test_prices_are_literals_even_with_a_quote_in_a_class():
    (_, sql), *_ = cost_sections({"o'brien": 2.0}, 80.0, 0.4)
    assert "('o''brien', 2.0)" in sql and "('*', 0.0)" in sql and "80.0" in sql


def test_weekly_demand_and_the_capacity_plan(tmp_path):
    """Three weeks of one 8-card class at one site: 10, 20, 30 card-hours, one 2-card job of 5, 10, 15 h
    each week; the plan forecasts 40, 50 card-hours and sizes the cards for the p95 wait."""
    from core.capacity import cards_for_wait
    from sinks.cost import weekly_demand
    from streams.analytics.capacity import capacity_plan

    monday = calendar.timegm((2026, 10, 5, 0, 0, 0))  # a Monday, 00:00 UTC
    with DuckStore(tmp_path / "w.duckdb") as store:
        store.write_compute_reports([report("g1", monday - 60, "dc1", "h100", 10.0, 8),
                                     report("g2", monday - 60, "dc1", "h100", 10.0, 8)])
        decisions, events = [], []
        for w, hours in enumerate((5, 10, 15)):
            t = monday + w * 7 * 86_400 + 3600
            decisions.append({**placed(f"j{w}", "red", "fine-tune", 2, "g1", t), "submitted_at": t - 600})
            events += [ev(f"j{w}", "started", t, "g1"), ev(f"j{w}", "finished", t + hours * 3600, duration=hours * 3600)]
        store.write_decisions(decisions)
        store.write_task_events(events)
        weekly, cards = weekly_demand(store.con)
    assert cards == {("h100", "dc1"): 16}
    assert [(r[0], r[1], r[2] - monday, r[3], r[4], r[5], r[6]) for r in weekly] == [
        ("h100", "dc1", w * 7 * 86_400, 10.0 * (w + 1), 1, 2.0, 600.0) for w in range(3)]
    (plan,) = capacity_plan(weekly, cards, weeks=2, wait_target_h=1.0)
    assert plan["forecast_card_h"] == [40.0, 50.0] and plan["forecast_low"] == [40.0, 50.0]
    assert plan["last_week_card_h"] == 30.0 and plan["utilisation_last_week_pct"] == round(100 * 30 / (16 * 168), 1)
    # 3 jobs in 3 weeks (504 h), 10 h each on 2 cards, demand growing to 50/20 = 2.5x the weeks' mean:
    # lam = 0.01488/h, a = 0.1488; one job at a time waits beyond 1 h with 0.149 e^-0.085 = 13.7 %, two
    # with C(2, a) = 0.0103 x e^-0.185 = 0.9 % <= 5 %: two jobs' worth, 4 cards
    assert plan["cards_needed"] == cards_for_wait(3 / 504 * 2.5, 10.0, 2.0, 1.0) == 4


def test_transfer_volume_and_its_price(tmp_path):
    with DuckStore(tmp_path / "x.duckdb") as store:
        store.write_compute_reports([report("h1", T0, "dc1", "h100", 10.0, 8, 100.0),
                                     report("a1", T0, "dc2", "a100", 6.0, 8)])
        store.write_decisions([{**placed("t1", "red", "inference", 1, "h1", T0), "load_gb": 20.0}])
        store.write_reschedules([{"task_id": "t1", "at": T0 + 1800, "from_nodes": ["h1"], "to_nodes": ["a1"],
                                  "trigger": "degradation", "expected_gain_s": 100, "migration_cost_s": 10,
                                  "transfer_gb": 25.0, "before": {"composite": 40}, "after": {"composite": 80}}])
        store.write_task_events([ev("t1", "started", T0, "h1"), ev("t1", "started", T0 + 1800, "a1"),
                                 ev("t1", "finished", T0 + 3600, duration=3600)])
        out = run_sections(store.con, cost_sections(PRICES, ENERGY, IDLE, transfer_price_gb=0.02))
    rows = [[dict(zip(s["columns"], r, strict=True)) for r in s["rows"]] for s in out]
    t1 = rows[0][0]
    # 20 GB loaded at placement (October 31, 23:00) + 25 GB moved at 23:30: 45 GB x 0.02 = 0.9
    # cards: 0.5 h x 1 h100 card x 4.0 + 0.5 h x 1 a100 card x 1.0 = 2.5; energy: 10 kW / 8 x 0.5 h
    # = 0.625 kWh at 100/MWh + 6 kW / 8 x 0.5 h = 0.375 kWh at 50/MWh = 0.0625 + 0.01875 = 0.08125
    assert (t1["transfer_gb"], t1["transfer_cost"]) == (45.0, 0.9)
    assert t1["cost"] == pytest.approx(2.5 + 0.08125 + 0.9, abs=1e-4)
    by_team = {(r["team"], r["month"]): r for r in rows[1]}
    assert by_team[("red", "2026-10")]["transfer_gb"] == 45.0


def test_measured_site_energy_beside_the_modelled(tmp_path):
    def power_window(start, mw):
        return {"src": "dc1", "dst": "", "metric": "power_mw", "window_start": start, "window_end": start + 1800,
                "count": 30, "kept": 30, "outliers": 0, "lost": 0, "mean": mw, "p50": mw, "p95": mw, "p99": mw,
                "min": mw, "max": mw}

    with DuckStore(tmp_path / "m.duckdb") as store:
        store.write_compute_reports([report("h1", T0, "dc1", "h100", 10.0, 8, 100.0),
                                     report("h1", T0 + 3600, "dc1", "h100", 10.0, 8, 100.0)])
        store.write_decisions([placed("t1", "red", "inference", 4, "h1", T0)])
        store.write_task_events([ev("t1", "started", T0, "h1"), ev("t1", "finished", T0 + 1800, duration=1800)])
        store.write_windows([power_window(T0, 0.012), power_window(T0 + 1800, 0.008)])
        out = run_sections(store.con, cost_sections(PRICES, ENERGY, IDLE))
    (row,) = [dict(zip(out[4]["columns"], r, strict=True)) for r in out[4]["rows"]]
    # modelled: t1 10 kW x 4/8 x 0.5 h = 2.5 kWh; idle 10 kW x 0.5 x 8/8 free x 1 h = 5 kWh (October)
    # measured: 0.012 MW x 0.5 h = 6 kWh + 0.008 MW x 0.5 h = 4 kWh; 10 / 7.5 = 1.333
    assert row == {"site": "dc1", "month": "2026-10", "modelled_kwh": 7.5, "measured_kwh": 10.0,
                   "measured_over_modelled": 1.333}


def test_a_cancelled_task_is_charged_until_the_cancel_and_who_cancelled_is_kept(tmp_path):
    """Issue 28: cancelling used to need a forged `finished`, which charged work that never ran. A task
    started at T0 and cancelled 30 min later on 2 h100 cards pays 1 card-hour x 4.0 = 4.0 (the `stopped`
    that follows adds nothing)."""
    with DuckStore(tmp_path / "x.duckdb") as store:
        store.write_compute_reports([report("h1", T0, "dc1", "h100", 10.0, 8, 100.0)])
        store.write_decisions([placed("t1", "red", "inference", 2, "h1", T0)])
        store.write_task_events([ev("t1", "started", T0, "h1"),
                                 {**ev("t1", "cancel", T0 + 1800), "by": "ops", "reason": "wrong input"},
                                 ev("t1", "stopped", T0 + 1860)])
        by_task = {r[0]: r for r in run_sections(store.con, cost_sections(PRICES, ENERGY, IDLE))[0]["rows"]}
        assert store.query("SELECT requested_by, reason FROM task_events WHERE event = 'cancel'") == [
            ("ops", "wrong input")]
        columns = run_sections(store.con, cost_sections(PRICES, ENERGY, IDLE))[0]["columns"]
    t1 = dict(zip(columns, by_task["t1"], strict=True))
    assert (t1["card_h"], t1["card_cost"]) == (1.0, 4.0)
