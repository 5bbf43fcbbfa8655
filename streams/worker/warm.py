"""Compiling the numba kernels before anything needs them.

The ingest kernels are compiled (or loaded from numba's cache) before the worker starts consuming
(``streams.worker.windowing.warm_up``). The forecast, scoring and decision kernels are compiled in a
thread started with the worker: on a fresh clone that takes seconds, which a first ``GET /forecast``
or a first decision would otherwise spend inside a request, or inside the event loop. Until it is done
the worker says not ready ("compiling kernels"), and forecast requests wait for it off the loop.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

log = logging.getLogger(__name__)


def compile_forecast() -> None:
    from core.forecast import forecast

    t = np.arange(400, dtype=np.float64)
    forecast(np.vstack([np.sin(t / 20.0) + 2.0, np.full(t.size, np.nan)]), 8, 96)


def compile_scoring() -> None:
    from core.scoring import PARALLEL_MIN_CELLS, ScoringInputs, score_all, score_parts

    def inputs(jobs: int, nodes: int) -> ScoringInputs:
        f32 = np.float32
        return ScoringInputs(
            compute=np.full((nodes, 3), 50, f32), usable=np.ones((nodes, 3), f32), available=np.ones(nodes, bool),
            node_class=np.zeros(nodes, np.int64), has_accel=np.ones(nodes, bool),
            node_quality=np.full(nodes, 50, f32), quality=np.full((1, nodes), 50, f32),
            bandwidth_gbps=np.ones((1, nodes), f32), kind=np.zeros(jobs, np.int64), alpha=np.full(jobs, 0.5, f32),
            need=np.zeros((jobs, 3), f32), class_mask=np.zeros(jobs, np.int64),
            ep_ptr=np.zeros(jobs + 1, np.int64), ep_idx=np.zeros(0, np.int64),
            data_ep=np.full(jobs, -1, np.int64), data_gb=np.zeros(jobs, f32), accel_penalty=np.zeros(jobs, f32))

    score_parts(inputs(1, 2))  # the serial kernel, both entry points
    score_all(inputs(1, 2))
    score_all(inputs(PARALLEL_MIN_CELLS // 256, 256))  # the parallel one


def compile_decisions() -> None:
    """A few decisions on a small cluster through the scheduler itself (seconds rule and points rule,
    one-node tasks with data, a gang, the queue with a reservation, moves): every kernel a decision
    runs, with the argument types a live one passes."""
    import json

    from schemas.sched import Task
    from streams.worker.scheduling.state import Scheduler
    from streams.worker.state_tables import Inventory, NetState

    now = time.time()
    win = {"window_start": now - 10, "window_end": now, "count": 100, "kept": 100, "outliers": 0, "lost": 0}
    inv, net = {}, {}
    for i in range(8):
        inv[f"n{i}".encode()] = json.dumps({
            "node": f"n{i}", "ts": now, "received_at": now, "cards": 8, "accel_class": "gpu", "rack": f"r{i // 4}",
            "peak_tflops": {"fp16": 400.0 + 600.0 * (i % 2), "fp32": 100.0}, "mem_gb": 80.0, "host_mem_gb": 1024.0,
            "inter_bw_gbps": 400.0}).encode()
    for a in range(2):
        for b in ["store", *(f"rack:r{r}" for r in range(2))]:
            rtt = 0.3 if b == "store" else (0.05 if b == f"rack:r{a}" else 0.2)
            src, dst = (b, f"rack:r{a}") if b == "store" else (f"rack:r{a}", b)
            net[f"{src}|{dst}".encode()] = json.dumps({"src": src, "dst": dst, "metrics": {"rtt_ms": {
                **win, "mean": rtt * 0.9, "p50": rtt * 0.9, "p95": rtt, "p99": rtt, "min": rtt * 0.8,
                "max": rtt}}}).encode()
    for rule in ("seconds", "points"):
        sched = Scheduler(NetState(net), Inventory(inv), node_timeout_s=float("inf"), placement_rule=rule)
        tasks = [Task(id=f"w{k}", type="training-data-parallel", peers=2 if k % 3 == 0 else 1,
                      resources={"cards": 8 if k % 3 == 0 else 4}, submitted_at=now, expected_duration_s=600.0,
                      **({"data_source": {"node": "store", "size_gb": 5}} if k % 2 else {})) for k in range(10)]
        sched.decide_many(tasks[:6], now)
        for t in tasks[6:]:
            sched.decide(t, now)
        for tid in list(sched.running)[:2]:
            sched.start(tid, sched.running[tid].nodes)
        sched.retry_pending(now + 1)
        sched.reschedule(now + 400)


class KernelWarmer:
    """Runs the compilations in a daemon thread; ``done`` is set when they are over (failed ones are
    logged: the request that needs the kernel then compiles it, as before)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.seconds: float | None = None

    def start(self) -> KernelWarmer:
        threading.Thread(target=self._run, name="cnsched-warm", daemon=True).start()
        return self

    def _run(self) -> None:
        t = time.monotonic()
        for step in (compile_forecast, compile_scoring, compile_decisions):
            try:
                step()
            except Exception:
                log.exception("warming %s failed", step.__name__)
        self.seconds = time.monotonic() - t
        log.info("forecast, scoring and decision kernels ready in %.1f s", self.seconds)
        self.done.set()
