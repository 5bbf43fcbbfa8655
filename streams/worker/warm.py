"""Compiling the numba kernels before anything needs them.

The ingest kernels are compiled (or loaded from numba's cache) before the worker starts consuming
(``streams.worker.windowing.warm_up``). The forecast and scoring kernels are compiled in a thread
started with the worker: on a fresh clone that takes seconds, which a first ``GET /forecast`` or a
first decision would otherwise spend inside a request, or inside the event loop. Until it is done
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
        for step in (compile_forecast, compile_scoring):
            try:
                step()
            except Exception:
                log.exception("warming %s failed", step.__name__)
        self.seconds = time.monotonic() - t
        log.info("forecast and scoring kernels ready in %.1f s", self.seconds)
        self.done.set()
