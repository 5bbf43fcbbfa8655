"""Compute inventory view: reports kept in the `compute` table -> core/metering arrays -> scores."""

from __future__ import annotations

import math

import numpy as np

from core.metering import (
    DEFAULT_METERING,
    DIMENSIONS,
    PRECISIONS,
    MeteringModel,
    NodeMetrics,
    compute_scores,
    dimensions,
)

TASK_KINDS = ("training", "inference", "generic")

# Per accelerator model: factor from the vendor's stated peak to standard dense units. Vendors
# often quote fp16/int8 with 2:4 sparsity; 0.5 turns those into dense figures.
DEFAULT_MODEL_CONVERSION: dict[str, dict[str, float]] = {
    "H100-SXM": {"fp32": 1.0, "fp16": 0.5, "int8": 0.5},
    "H200-SXM": {"fp32": 1.0, "fp16": 0.5, "int8": 0.5},
    "B200": {"fp32": 1.0, "fp16": 0.5, "int8": 0.5},
    "L40S": {"fp32": 1.0, "fp16": 0.5, "int8": 0.5},
    "A100-SXM": {"fp32": 1.0, "fp16": 1.0, "int8": 1.0},
    "MI300X": {"fp32": 1.0, "fp16": 1.0, "int8": 1.0},
}
# Work per unit of a standard benchmark, in FLOP (so samples/s x FLOP/sample = FLOP/s).
DEFAULT_BENCHMARK_WORK: dict[str, float] = {
    "resnet50-train": 3 * 4.1e9,  # forward + backward, per image
    "resnet50-infer": 4.1e9,
    "bert-large-train": 3 * 2 * 340e6 * 512,  # per 512-token sequence
    "llama-7b-train": 6 * 7e9,  # per token: forward + backward
    "llama-7b-infer": 2 * 7e9,  # per token
    "llama-70b-infer": 2 * 70e9,
}


def node_metrics(
    reports: list[dict],
    conversion: dict[str, dict[str, float]],
    benchmark_work: dict[str, float],
    now: float,
) -> tuple[NodeMetrics, list[str]]:
    """Arrays for the metering model, and the class names (index = node_class code)."""
    classes: dict[str, int] = {}
    n = len(reports)

    def col(field: str) -> np.ndarray:
        return np.array([math.nan if r.get(field) is None else float(r[field]) for r in reports], dtype=np.float64)

    peak = np.full((n, 3), np.nan)
    factor = np.ones((n, 3))
    bench_value = np.full(n, np.nan)
    bench_work = np.full(n, np.nan)
    bench_age = np.full(n, np.inf)
    node_class = np.zeros(n, dtype=np.int64)
    for i, r in enumerate(reports):
        cls = r.get("accel_class") or r.get("accel_model") or ("cpu" if not r.get("cards") else "unknown")
        node_class[i] = classes.setdefault(cls, len(classes))
        for j, p in enumerate(PRECISIONS):
            v = (r.get("peak_tflops") or {}).get(p)
            peak[i, j] = math.nan if v is None else v
            factor[i, j] = conversion.get(r.get("accel_model", ""), {}).get(p, 1.0)
        # the freshest benchmark whose workload we know
        for b in sorted(r.get("benchmarks") or [], key=lambda b: -b["measured_at"]):
            if b["name"] in benchmark_work:
                bench_value[i], bench_work[i] = b["value"], benchmark_work[b["name"]]
                bench_age[i] = now - b["measured_at"]
                break
    m = NodeMetrics(
        node_class=node_class, cards=col("cards"), peak=peak, peak_factor=factor,
        bench_value=bench_value, bench_work=bench_work, bench_age_s=bench_age,
        mem_gb=col("mem_gb"), mem_bw_gbs=col("mem_bw_gbs"), host_mem_bw_gbs=col("host_mem_bw_gbs"),
        intra_bw_gbps=col("intra_bw_gbps"), intra_bw_measured_gbps=col("intra_bw_measured_gbps"),
        inter_bw_gbps=col("inter_bw_gbps"), inter_bw_measured_gbps=col("inter_bw_measured_gbps"),
        availability=np.where(np.isnan(col("availability")), 1.0, col("availability")),
        idle_rate=col("idle_rate"), queue_delay_s=col("queue_delay_s"),
    )
    return m, list(classes)


def is_available(record: dict, now: float, timeout_s: float) -> bool:
    """Up, and heard from within the timeout."""
    return record.get("status", "up") == "up" and now - record["received_at"] <= timeout_s


def scored(records: list[dict], conversion, benchmark_work, now: float, timeout_s: float,
           model: MeteringModel = DEFAULT_METERING) -> list[dict]:
    """Every node's report with availability, dimension scores and compute score per task kind."""
    if not records:
        return []
    m, classes = node_metrics(records, conversion, benchmark_work, now)
    available = np.array([is_available(r, now, timeout_s) for r in records])
    m.availability = np.where(available, m.availability, 0.0)
    out = []
    per_kind = {k: (compute_scores(m, k, model), dimensions(m, k, model)) for k in TASK_KINDS}
    for i, r in enumerate(records):
        out.append({
            "node": r["node"],
            "class": classes[m.node_class[i]],
            "available": bool(available[i]),
            "compute_score": {k: round(float(per_kind[k][0][i]), 4) for k in TASK_KINDS},
            "dimensions": {k: {d: round(float(per_kind[k][1][i, j]), 4) for j, d in enumerate(DIMENSIONS)}
                           for k in TASK_KINDS},
            "report": {k: v for k, v in r.items() if k != "received_at"},
            "last_seen": r["received_at"],
            "age_s": round(now - r["received_at"], 3),
        })
    return out
