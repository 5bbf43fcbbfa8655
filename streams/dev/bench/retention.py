"""`cnsched bench retention`: the DuckDB file day by day as the sink fills it with probe windows, kept
whole (the baseline: no retention) beside the retention of sinks/retention.py, on the same windows.

``series`` paths (or node-local series) each send one 10-s window a simulated day's worth of times
(8,640); after each day the retention pass runs as of the day's end and the file is checkpointed.
The retention pass is the sink's (sinks/retention.py: roll-ups, then a fresh copy of the file once it
has grown half again since the last one). The retention is scaled down to show a steady state within a short run (raw 2 days, minutes to day
4, hours to day 8 by default; the live defaults are 7, 90 and 730 days): rows and bytes must stop
growing once the hour roll-ups' period has passed, while the baseline grows by a day's rows every day.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

DAY_S = 86_400.0
T0 = 1_764_374_400.0  # 2025-11-29 00:00 UTC


def _day(series: int, day: int, step_s: float, rng) -> pa.Table:
    per = int(DAY_S // step_s)
    start = T0 + day * DAY_S + step_s * np.arange(per)
    ws = np.tile(start, series)
    v = rng.gamma(4.0, 0.25, ws.size)
    src = pa.array([f"n{i}" for i in range(series)]).take(pa.array(np.repeat(np.arange(series), per)))
    n = np.full(ws.size, 50, np.int64)
    return pa.table({"src": src, "dst": pa.array(["store"] * ws.size), "metric": pa.array(["rtt_ms"] * ws.size),
                     "window_start": ws, "window_end": ws + step_s, "count": n, "kept": n,
                     "outliers": np.zeros(ws.size, np.int64), "lost": np.zeros(ws.size, np.int64),
                     "mean": v, "p50": v * 0.9, "p95": v * 1.6, "p99": v * 2.0, "min": v * 0.5, "max": v * 2.5})


def bench_retention(series: int = 1000, days: int = 12, raw_days: float = 2, minute_days: float = 4,
                    hour_days: float = 8, step_s: float = 10.0) -> dict:
    from sinks.duckdb_store import DuckStore
    from sinks.retention import Retention, compact, copy_due, copy_fresh

    keep = Retention(raw_days, minute_days, hour_days)
    keep.check()
    rng = np.random.default_rng(0)
    out: dict = {"series": series, "windows_per_day": series * int(DAY_S // step_s),
                 "retention_days": {"raw": raw_days, "minute": minute_days, "hour": hour_days}, "days": []}
    with tempfile.TemporaryDirectory() as d:
        files = {"all": Path(d) / "all.duckdb", "retained": Path(d) / "retained.duckdb"}
        stores = {k: DuckStore(p) for k, p in files.items()}
        spent = {"insert": 0.0, "retention": 0.0}
        copied = None
        try:
            for day in range(days):
                batch = _day(series, day, step_s, rng)
                row = {"day": day + 1}
                for name, store in stores.items():
                    t = time.perf_counter()
                    store._insert_table("windows", batch)
                    spent["insert"] += time.perf_counter() - t
                    store.con.execute("CHECKPOINT")
                    if name == "retained":  # what the sink does: the pass, and a fresh copy when due
                        t = time.perf_counter()
                        if any(compact(store.con, T0 + (day + 1) * DAY_S, keep).values()):
                            store.con.execute("CHECKPOINT")
                            if copy_due(files[name].stat().st_size, copied):
                                fresh = files[name].with_name("fresh.duckdb")
                                copied = copy_fresh(store.con, fresh)
                                store.close()
                                os.replace(fresh, files[name])
                                store = stores[name] = DuckStore(files[name])
                                row["copied"] = True
                        spent["retention"] += time.perf_counter() - t
                    row[f"{name}_rows"] = store.query("SELECT count(*) FROM windows")[0][0]
                    row[f"{name}_mb"] = round(files[name].stat().st_size / 1e6, 1)
                out["days"].append(row)
        finally:
            for store in stores.values():
                store.close()
    last = out["days"][-1]
    out["ratio_rows"] = round(last["all_rows"] / max(last["retained_rows"], 1), 2)
    out["ratio_mb"] = round(last["all_mb"] / max(last["retained_mb"], 0.1), 2)
    steady = out["days"][int(hour_days):]  # after the hour roll-ups' period: rows equal, bytes within 10 %
    mb = [r["retained_mb"] for r in steady]
    out["flat_after_retention"] = bool(steady) and len({r["retained_rows"] for r in steady}) == 1 and \
        max(mb) <= 1.1 * min(mb)
    out["retention_pass_s_per_day"] = round(spent["retention"] / days, 2)
    return out
