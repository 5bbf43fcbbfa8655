"""`cnsched bench netstate`: window results into the network view, one message at a time (how the
netstate agent handled them up to 017afda) beside steps of messages (``apply_windows``: each path's
record merged over the step, written once, the columns updated once per step), in one run.

Rack-level probing at 5,000 nodes is about 400,000 paths, each bringing one window result per metric
every window: tens of thousands of messages a second into one agent (the netstate topic has one
partition). In process, on a table that counts its writes (a Faust table sends a changelog record
per write, not counted in the times here); the records both ways are compared."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

from schemas.windows import WindowResult
from streams.adapters.network import merge_window
from streams.metrics import Counters
from streams.worker.state_tables import NetState, apply_windows

METRICS = ("rtt_ms", "loss", "bw_util", "retrans")


class CountingTable(dict):
    """A table that counts its writes (a Faust table sends one changelog record per write)."""

    writes = 0

    def __setitem__(self, key, value) -> None:
        self.writes += 1
        super().__setitem__(key, value)


def _events(paths: int, end: float) -> list:
    """One window result per path and metric, ending at ``end``, as the windows come: metric by metric
    within each path's source."""
    out = []
    for i in range(paths):
        for metric in METRICS:
            v = 1.0 + (i % 7) / 10
            w = {"src": f"rack:r{i // 100}", "dst": f"rack:s{i % 100}", "metric": metric, "window_start": end - 10,
                 "window_end": end, "count": 100, "kept": 98, "outliers": 2, "lost": 0, "mean": v, "p50": v,
                 "p95": v * 2, "p99": v * 3, "min": v / 2, "max": v * 4}
            out.append(SimpleNamespace(value=json.dumps(w).encode(),
                                       message=SimpleNamespace(topic="netstate.windows", partition=0, offset=len(out))))
    return out


def _one_by_one(net: NetState, events: list) -> None:
    for event in events:
        w = WindowResult.model_validate_json(event.value).model_dump()
        key = f"{w['src']}|{w['dst']}".encode()
        net.put(key, merge_window(net.get_key(key), w))


async def _steps(net: NetState, events: list, step: int) -> None:
    counters = Counters()
    for k in range(0, len(events), step):
        await apply_windows(net, events[k:k + step], counters)


def bench_netstate(paths: int = 20_000, step: int = 200) -> dict:
    """``paths`` paths' first windows make the view, then their next windows are timed each way."""
    first, second = _events(paths, 10.0), _events(paths, 20.0)
    out: dict = {"paths": paths, "metrics": len(METRICS), "messages": len(second), "step": step}
    records = []
    for name in ("one_by_one", "steps"):
        table = CountingTable()
        net = NetState(table)
        net.columns()  # the scheduler's columns exist: every write keeps them in step
        asyncio.run(_steps(net, first, step))
        writes = table.writes
        t = time.perf_counter()
        if name == "one_by_one":
            _one_by_one(net, second)
        else:
            asyncio.run(_steps(net, second, step))
        took = time.perf_counter() - t
        out[f"{name}_per_s"] = round(len(second) / took)
        out[f"{name}_table_writes"] = table.writes - writes
        records.append({k: v for k, v in net._all().items()})
    out["ratio"] = round(out["steps_per_s"] / out["one_by_one_per_s"], 2)
    out["same_records"] = records[0] == records[1]
    return out


_DRIVER = """
import asyncio, hashlib, json, sys, time
from streams.dev.bench.netstate import CountingTable, _events, _steps
from streams.worker.state_tables import NetState
paths, step, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rates = []
for r in range(rounds):
    table = CountingTable()
    net = NetState(table)
    net.columns()
    asyncio.run(_steps(net, _events(paths, 10.0), step))
    second = _events(paths, 20.0)
    t = time.perf_counter()
    asyncio.run(_steps(net, second, step))
    rates.append(len(second) / (time.perf_counter() - t))
records = sorted(((k.decode(), json.loads(v)) for k, v in table.items()), key=lambda kv: kv[0])
print(json.dumps({"per_s": rates, "digest": hashlib.sha1(json.dumps(records).encode()).hexdigest()}))
"""


def bench_netstate_rev(baseline_rev: str, paths: int, step: int, rounds: int) -> dict:
    """The step (``apply_windows``) of ours beside ``baseline_rev``'s, each in a process of its own on
    the same window results, best of ``rounds``; whether the table holds the same records after it."""
    from streams.dev.bench.revs import REPO, run_driver, worktree

    out: dict = {"paths": paths, "metrics": len(METRICS), "messages": paths * len(METRICS), "step": step,
                 "rounds": rounds, "baseline_rev": baseline_rev}
    with worktree(baseline_rev, "cnsched-bench-netstate-") as old:
        ours, base = run_driver(REPO, _DRIVER, paths, step, rounds), run_driver(old, _DRIVER, paths, step, rounds)
    out["ours_per_s"], out[f"{baseline_rev}_per_s"] = round(max(ours["per_s"])), round(max(base["per_s"]))
    out["ratio_ours_over_baseline"] = round(max(ours["per_s"]) / max(base["per_s"]), 2)
    out["same_records"] = ours["digest"] == base["digest"]
    return out
