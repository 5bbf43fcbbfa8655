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
