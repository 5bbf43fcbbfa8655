"""Request parameters of the HTTP API, parsed without a server: values, or every bad field and why."""

import pytest

from schemas.api import ErrorBody
from streams.web.params import check_ids, forecast_query, paging, smoothing_query


def fields(err) -> dict:
    assert isinstance(err, ErrorBody) and err.error == "invalid request"
    return {f.field: f.reason for f in err.fields}


def test_ids():
    assert check_ids(node="gpu-01.eu:a") is None
    assert set(fields(check_ids(src="ok", dst="../etc"))) == {"dst"}
    assert fields(check_ids(node="-x"))["node"].startswith("must match")


def test_paging_defaults_bounds_and_every_bad_field():
    assert paging({}, 1000) == (0, 100)
    assert paging({"offset": "5", "limit": "1000"}, 1000) == (5, 1000)
    bad = fields(paging({"offset": "x", "limit": "1001"}, 1000))
    assert bad == {"offset": "must be an integer", "limit": "must be in [1, 1000]"}


def test_forecast_query_worked_values():
    # default step 60 s, horizon 60 min -> 60 steps
    assert forecast_query({}, 60.0) == {"metric": "rtt_ms", "stat": "mean", "step_s": 60.0, "horizon_steps": 60,
                                        "history_steps_shown": 0}
    # 5 min steps over 2 h -> 24 steps; 6 h of history shown -> 72 steps
    q = forecast_query({"metric": "bw_util", "stat": "p95", "step": "5min", "horizon": "2h", "history": "6h"}, 60.0)
    assert q == {"metric": "bw_util", "stat": "p95", "step_s": 300.0, "horizon_steps": 24, "history_steps_shown": 72}


@pytest.mark.parametrize("query,bad", [
    ({"stat": "median"}, {"stat"}),
    ({"metric": "a b"}, {"metric"}),
    ({"step": "7s"}, {"step"}),  # 7 s does not divide a day
    ({"step": "60s"}, {"step"}),  # a step is spelled as /openapi.json lists it: 1min
    ({"step": "soon", "stat": "x"}, {"step", "stat"}),
    ({"history": "0s"}, {"history"}),
    ({"horizon": "1.5h"}, {"horizon"}),  # whole numbers only
    ({"horizon": "100ms"}, {"horizon"}),
    ({"horizon": "2H"}, {"horizon"}),
])
def test_forecast_query_names_every_bad_field(query, bad):
    assert set(fields(forecast_query(query, 60.0))) == bad


def test_a_horizon_is_whole_steps_and_what_is_too_long_is_cut():
    # 90 s at 1 min steps: 2 steps (rounded up); 3 h at 1 s: 10,800 steps, cut to 10,080
    assert forecast_query({"step": "1min", "horizon": "90s"}, 60.0)["horizon_steps"] == 2
    assert forecast_query({"step": "1s", "horizon": "3h"}, 60.0)["horizon_steps"] == 10_080
    assert forecast_query({"step": "1s", "history": "1d"}, 60.0)["history_steps_shown"] == 10_080
    assert forecast_query({"horizon": "1s"}, 60.0)["horizon_steps"] == 1


def test_smoothing_query_defaults_and_errors():
    # the window for minute ramps is 1-5 minutes (issue 18): 5 one-minute intervals by default
    q = smoothing_query({})
    assert q == {"interval": 60.0, "period": 86400.0, "window": 5, "margin": 1.2, "dod": 0.9,
                 "ramp_limit": None, "trailing": False}
    assert smoothing_query({"window": "4", "trailing": "1", "ramp_limit": "2.5"})["window"] == 4
    assert smoothing_query({"window": "90s"})["window"] == 2  # 1.5 intervals, rounded
    assert smoothing_query({"window": "10s"})["window"] == 1  # at least one
    bad = fields(smoothing_query({"margin": "0", "dod": "1.5", "ramp_limit": "inf", "trailing": "yes",
                                  "window": "0"}))
    assert set(bad) == {"margin", "dod", "ramp_limit", "trailing", "window"}
    assert set(fields(smoothing_query({"margin": "1_0", "ramp_limit": "nan", "trailing": "True"}))) == {
        "margin", "ramp_limit", "trailing"}  # not JSON numbers; booleans as written


@pytest.mark.parametrize("query,field", [
    ({"interval": "1e-6s"}, "interval"),  # took 167 s and 10.9 GB before the bound (issue 15)
    ({"interval": "0.5s"}, "interval"),
    ({"interval": "500ms"}, "interval"),
])
def test_a_sizing_interval_under_a_second_is_refused(query, field):
    assert field in fields(smoothing_query(query))


@pytest.mark.parametrize("query,period", [
    ({"interval": "1s", "period": "30d"}, 1_000_000),  # 2,592,000 intervals: the newest 1,000,000
    ({"period": "60d"}, 31 * 86400),
    ({"interval": "1s", "period": "11d"}, 11 * 86400),  # 950,400 intervals: all
    ({"interval": "1min", "period": "31d"}, 31 * 86400),
])
def test_sizing_work_is_bounded_by_cutting_the_period(query, period):
    assert smoothing_query(query)["period"] == period
