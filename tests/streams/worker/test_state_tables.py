"""The network view's agent step (streams/worker/state_tables.py, apply_windows): a step of window
results merged per path, written once."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import numpy as np

from streams.dev.bench.netstate import CountingTable
from streams.metrics import Counters
from streams.worker.state_tables import NetState, apply_windows


def _window(src: str, dst: str, metric: str, end: float, p95: float) -> dict:
    return {"src": src, "dst": dst, "metric": metric, "window_start": end - 10, "window_end": end, "count": 10,
            "kept": 10, "outliers": 0, "lost": 0, "mean": p95, "p50": p95, "p95": p95, "p99": p95, "min": p95,
            "max": p95}


def _events(values: list[bytes]) -> list:
    return [SimpleNamespace(value=v, message=SimpleNamespace(topic="netstate.windows", partition=0, offset=k, key=None))
            for k, v in enumerate(values)]


def test_a_step_of_window_results_is_merged_per_path_and_written_once():
    table = CountingTable()
    net = NetState(table)
    cols = net.columns()  # built before the step: kept in step with it
    versions = []
    net.on_change = lambda: versions.append(net.version)
    steps = [_window("a", "b", "rtt_ms", 20.0, 5.0), _window("a", "b", "loss", 20.0, 0.0),
             _window("a", "b", "rtt_ms", 10.0, 99.0),  # older than the one held: not taken
             _window("a", "c", "rtt_ms", 20.0, 7.0), _window("a", "b", "rtt_ms", 30.0, 6.0)]
    values = [json.dumps(w).encode() for w in steps] + [b'{"not": "a window"}']
    counters = Counters()
    asyncio.run(apply_windows(net, _events(values), counters))
    rec = net.get("a", "b")
    assert set(rec["metrics"]) == {"rtt_ms", "loss"}
    assert rec["metrics"]["rtt_ms"]["window_end"] == 30.0 and rec["metrics"]["rtt_ms"]["p95"] == 6.0
    assert json.loads(table[b"a|b"]) == rec and net.get("a", "c")["metrics"]["rtt_ms"]["p95"] == 7.0
    assert table.writes == 2 and versions == [1]  # two paths, one write each, one version step
    assert counters.get("window_results_total") == 5 and counters.get("window_results_rejected_total") == 1
    assert cols.cols["p95"][cols.rows[(cols.code("a"), cols.code("b"))]] == 6.0
    # the next step starts from what the view holds: an older window leaves it, a newer one wins
    asyncio.run(apply_windows(net, _events([json.dumps(_window("a", "b", "rtt_ms", 25.0, 1.0)).encode(),
                                            json.dumps(_window("a", "c", "rtt_ms", 40.0, 8.0)).encode()]), counters))
    assert net.get("a", "b")["metrics"]["rtt_ms"]["p95"] == 6.0 and net.get("a", "c")["metrics"]["rtt_ms"]["p95"] == 8.0
    assert np.isclose(cols.cols["p95"][cols.rows[(cols.code("a"), cols.code("c"))]], 8.0)


def test_a_step_is_validated_whole_or_message_by_message_with_the_same_results():
    """window_results: a step of window results in one validation call gives what one call per message
    gives; a message that is not one window result (two in one, broken JSON, another shape) sends
    the step message by message, that message counted as rejected and the rest kept in order."""
    from streams.worker.state_tables import window_results

    good = [_window("a", "b", "rtt_ms", 20.0, 5.0), _window("a", "c", "loss", 20.0, 0.25),
            {**_window("b", "a", "rtt_ms", 30.0, 1.0), "extra": 1}]  # an unknown field is ignored
    values = [json.dumps(w).encode() for w in good]
    counters = Counters()
    whole = window_results(_events(values), counters)
    assert [w for _, w in whole] == [{k: v for k, v in w.items() if k != "extra"} for w in good]
    assert [e.message.offset for e, _ in whole] == [0, 1, 2] and counters.get("window_results_rejected_total") == 0
    for bad in (values[0] + b"," + values[1], b'{"src": "a"', b'{"not": "a window"}', b"null"):
        mixed = [values[0], bad, values[2]]
        got = window_results(_events(mixed), counters)
        assert [(e.message.offset, w) for e, w in got] == [(0, whole[0][1]), (2, whole[2][1])], bad
    assert counters.get("window_results_rejected_total") == 4


def test_a_record_that_cannot_take_a_window_fails_that_message_only():
    """A merge that raises (here a record in the table without its metrics) is that message's failure,
    counted; the other paths of the step are written."""
    table = CountingTable()
    table[b"a|b"] = b'{"src": "a", "dst": "b"}'
    net = NetState(table)
    counters = Counters()
    asyncio.run(apply_windows(net, _events([json.dumps(_window("a", "b", "rtt_ms", 20.0, 5.0)).encode(),
                                            json.dumps(_window("a", "c", "rtt_ms", 20.0, 7.0)).encode()]), counters))
    assert counters.get("messages_failed_total", topic="netstate.windows") == 1
    assert counters.get("window_results_total") == 1
    assert net.get("a", "c")["metrics"]["rtt_ms"]["p95"] == 7.0 and json.loads(table[b"a|b"]) == {"src": "a", "dst": "b"}


def test_records_are_written_as_json_that_reads_back_the_same_numbers():
    """The table's bytes (pydantic_core's encoder) read back by json.loads as the record written:
    NaN and infinities as Python's json writes them, floats to the last bit."""
    from streams.worker.state_tables import encode

    w = {**_window("a", "b", "rtt_ms", 20.0, 0.1 + 0.2), "mean": float("nan"), "max": float("inf"), "min": 5e-324,
         "p99": None}
    rec = {"src": "a", "dst": "b", "metrics": {"rtt_ms": {k: v for k, v in w.items() if k not in ("src", "dst", "metric")}}}
    back = json.loads(encode(rec))
    m = back["metrics"]["rtt_ms"]
    assert np.isnan(m["mean"]) and m["max"] == float("inf") and m["min"] == 5e-324 and m["p99"] is None
    assert m["p95"] == 0.30000000000000004 and {k: v for k, v in m.items() if k != "mean"} == \
        {k: v for k, v in rec["metrics"]["rtt_ms"].items() if k != "mean"}
