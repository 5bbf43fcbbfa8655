"""The request-routing replay (streams/replay/requests.py, issue 54): the trace as Azure ships it, the
measured serving model, each policy's choice and what its users wait — worked examples by hand."""

import numpy as np
import pytest

from streams.replay.requests import (
    RequestTrace,
    RequestWorld,
    Serving,
    load_azure_llm,
    serve,
    surged,
)
from streams.replay.traces import TraceError
from tests.helpers.data import skyplane_network

FLAT = Serving(slots=1, prefill_ms=100.0, prefill_ms_per_token=0.0, tbt_ms=10.0, tbt_ms_per_active=0.0)
RTT = np.array([[10.0, 100.0], [100.0, 10.0]])  # user region 0 is 10 ms from replica 0, 100 ms from replica 1


def test_the_trace_is_read_as_azure_ships_it_and_bad_rows_are_named(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n2023-11-17 00:00:00,1,2\n")
    t = load_azure_llm(p)
    assert t.t_s.tolist() == pytest.approx([0.0, 4.314579, 20653.319410], abs=1e-6)
    assert t.prompt.tolist() == [374, 396, 1] and t.output.tolist() == [44, 109, 2]
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,4.5\n")
    with pytest.raises(TraceError, match=r"row 2 GeneratedTokens: '4.5' is not a whole number"):
        load_azure_llm(p)
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n")
    with pytest.raises(TraceError, match="row 2 TIMESTAMP"):
        load_azure_llm(p)
    p.write_text("time,prompt,output\n")
    with pytest.raises(TraceError, match="header"):
        load_azure_llm(p)


def test_the_serving_model_is_the_fit_to_splitwise_s_measurements():
    s = Serving()
    # a 1,000-token prompt: 11.7 + 0.152 x 1,000 = 163.7 ms; 200 tokens at 4 in the batch: 200 x (36.7 + 1.84) ms
    assert s.prefill_s(1000) == pytest.approx(0.1637)
    assert s.decode_s(200, 4) == pytest.approx(200 * 0.03854)
    # against the measurements fitted (H100, batch 1): 512 tokens 84 ms, 4,096 tokens 642 ms; a token 37 ms
    assert s.prefill_s(512) == pytest.approx(0.084, rel=0.08) and s.prefill_s(4096) == pytest.approx(0.642, rel=0.02)
    assert s.decode_s(1, 1) == pytest.approx(0.037, rel=0.02)


def three_at_once():
    # three requests from region 0 at second 0, 10 output tokens each: 100 ms prefill + 100 ms of tokens
    return RequestTrace(np.zeros(3), np.full(3, 50, np.int64), np.full(3, 10, np.int64)), np.zeros(3, np.int64)


@pytest.mark.parametrize("policy, ttft", [
    # all to the near replica, one slot: each waits for the one before (0.2 s each); TTFT = wait + 0.1 + 10 ms
    ("nearest", [0.11, 0.31, 0.51]),
    # the second goes far (100 ms there and back): 0.05 + 0.1 + 0.05; the third waits at the near one
    ("least-loaded", [0.11, 0.20, 0.31]),
    # the near one holds 1 >= 0.8 x 1 slot: the second spills to the next nearest; the third finds both full: nearest
    ("nearest-spill", [0.11, 0.20, 0.31]),
])
def test_each_policy_s_choice_and_what_its_users_wait(policy, ttft):
    trace, origin = three_at_once()
    w = RequestWorld(sites=2, replicas_per_site=1, serving=FLAT)
    s = serve(trace, origin, lambda t: RTT, 2, w, policy)
    assert s.ttft_s.tolist() == pytest.approx(ttft)
    assert (s.e2e_s - s.ttft_s).tolist() == pytest.approx([0.1] * 3)  # the output's 10 tokens at 10 ms


def test_ours_sends_a_light_load_to_the_near_replica_and_spreads_a_heavy_one():
    w = RequestWorld(sites=2, replicas_per_site=1, serving=Serving(slots=16))
    light = RequestTrace(np.arange(20) * 10.0, np.full(20, 500, np.int64), np.full(20, 50, np.int64))
    s = serve(light, np.zeros(20, np.int64), lambda t: RTT, 2, w, "ours")
    assert s.replica.tolist() == [0] * 20  # all near, none waits
    assert s.ttft_s == pytest.approx(np.full(20, 0.01 + Serving().prefill_s(500)))
    assert len(s.route_ms) == 20  # a request every 10 s, the weights every 10 s: recomputed before each
    heavy = RequestTrace(np.arange(400) * 0.05, np.full(400, 500, np.int64), np.full(400, 200, np.int64))
    s = serve(heavy, np.zeros(400, np.int64), lambda t: RTT, 2, w, "ours")
    # 20 requests/s of ~8 s each: one replica's 16 slots hold 2/s; once the weights see the rate, most cross
    assert (s.replica[:10] == 0).all() and 0.3 < s.replica.mean() < 0.7


def test_a_surge_triples_the_rate_in_its_window_after_a_ramp():
    t = RequestTrace(np.arange(0, 3600, 1.0), np.ones(3600, np.int64), np.ones(3600, np.int64))
    w = RequestWorld(surge=3.0, surge_at_s=1800.0, surge_s=600.0, surge_ramp_s=60.0)
    s, inside = surged(t, w, np.random.default_rng(0))
    assert inside.sum() == pytest.approx(3 * 600 - 2 * 30, rel=0.05)  # the ramp's minute adds half of it
    first = (s.t_s >= 1800) & (s.t_s < 1860)
    assert first.sum() == pytest.approx(60 + 2 * 30, rel=0.2)
    assert ((s.t_s < 1800) | (s.t_s >= 2400)).sum() == 3000  # nothing added outside it
    assert np.all(np.diff(s.t_s) >= 0)


def test_simulate_requests_refuses_bad_input_in_one_line_and_compares_on_seeds(tmp_path, capsys):
    import json

    from streams.cli.main import main

    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-3,4\n")
    assert main(["simulate", "--requests", str(bad), "--no-store"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "row 2 ContextTokens: '-3' is not a whole number" in err
    assert main(["simulate", "--requests", str(bad), "--surge", "0.5", "--no-store"]) == 2
    assert "--surge at least 1" in capsys.readouterr().err
    # a light trace (a request every 30 s): every policy meets the SLO, so ours' misses differ by 0 from each
    ok = tmp_path / "ok.csv"
    ok.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:{m:02d}:{s:02d},500,50\n" for m in range(10) for s in (0, 30)))
    assert main(["simulate", "--requests", str(ok), "--seeds", "2", "--rtt-dynamics", "none", "--json",
                 "--no-store", "--network", skyplane_network(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p: f["slo_attainment"] for p, f in out["policies"].items()} == {
        "ours": 1.0, "nearest": 1.0, "least-loaded": 1.0, "nearest-spill": 1.0}
    misses = [r for r in out["ours_against"] if r["metric"] == "slo_miss_pp"]
    assert [(r["against"], r["change"], r["seeds"]) for r in misses] == [
        ("nearest", 0.0, 2), ("least-loaded", 0.0, 2), ("nearest-spill", 0.0, 2)]
