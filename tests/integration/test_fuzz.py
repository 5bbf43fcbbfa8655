"""A small `make fuzz` (issue 15): hostile messages on every input topic, through the real broker into a
real worker and sink. Nothing crashes, nothing vanishes, the valid windows are exact."""

import pytest

from streams.dev.fuzz import passed, run_fuzz

pytestmark = pytest.mark.integration


async def test_hostile_campaign_crashes_nothing_loses_nothing_and_keeps_windows_exact(make_settings, tmp_path):
    r = await run_fuzz(make_settings(), messages=2000, seed=7, workdir=tmp_path)
    assert r["crashes"]["worker_alive"] and r["crashes"]["sink_alive"], r
    assert r["crashes"]["worker_tracebacks"] == r["crashes"]["sink_tracebacks"] == 0, r
    assert r["crashes"]["internal_errors"] == 0, r
    assert r["vanished"]["worker"] == r["vanished"]["sink"] == 0, r
    kinds = {k.split(":")[1] for k in r["dead_letters"]}
    assert {"undecodable", "schema", "out_of_range", "too_large", "unknown_task"} <= kinds, r["dead_letters"]
    w = r["windows"]
    assert w["expected"] > 100 and w["emitted"] == w["stored"] == w["expected"], w
    assert w["wrong_or_missing"] == w["extra"] == w["stored_wrong_or_missing"] == 0, w
    assert r["memory_mb"]["growth"] < 400, r["memory_mb"]  # was +2 GB from one ±1e300 message
    assert passed(r)
