"""Compute inventory: reports kept in the `compute` table -> core/metering arrays -> the scheduler's
node arrays (:class:`NodeView`) and the API's per-node answers (:func:`scored`), from one metering pass."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from core.ect import card_speed
from core.energy import energy_scores
from core.metering import (
    ACCELERATORS,
    DEFAULT_METERING,
    DIMENSIONS,
    PRECISIONS,
    MeteringModel,
    NodeMetrics,
    clock_factor,
    compute_capability,
    compute_scores,
    dimensions,
    economy_factor,
    tensor_peak_tflops,
)
from core.quality import DEFAULT_LINK_GBPS
from core.vocabulary import TASK_KINDS
from schemas.compute import node_class
from streams.adapters.network import rack_endpoint


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
    codes = np.zeros(n, dtype=np.int64)
    for i, r in enumerate(reports):
        codes[i] = classes.setdefault(node_class(r), len(classes))
        model = r.get("accel_model", "")
        slow = clock_factor(model, r.get("clock_mhz"))  # running below its boost clock
        for j, p in enumerate(PRECISIONS):
            v = (r.get("peak_tflops") or {}).get(p)
            peak[i, j] = math.nan if v is None else v
            factor[i, j] = conversion.get(model, {}).get(p, 1.0) * slow
        fp16 = PRECISIONS.index("fp16")
        derived = tensor_peak_tflops(model, r.get("tensor_cores"), r.get("clock_mhz"))
        if math.isnan(peak[i, fp16]) and derived is not None:  # dense already, at the reported clock
            peak[i, fp16], factor[i, fp16] = derived, 1.0
        # the freshest benchmark whose workload we know
        for b in sorted(r.get("benchmarks") or [], key=lambda b: -b["measured_at"]):
            if b["name"] in benchmark_work:
                bench_value[i], bench_work[i] = b["value"], benchmark_work[b["name"]]
                bench_age[i] = now - b["measured_at"]
                break
    m = NodeMetrics(
        node_class=codes, cards=col("cards"), peak=peak, peak_factor=factor,
        bench_value=bench_value, bench_work=bench_work, bench_age_s=bench_age,
        mem_gb=col("mem_gb"), mem_bw_gbs=col("mem_bw_gbs"), host_mem_bw_gbs=col("host_mem_bw_gbs"),
        intra_bw_gbps=col("intra_bw_gbps"), intra_bw_measured_gbps=col("intra_bw_measured_gbps"),
        inter_bw_gbps=col("inter_bw_gbps"), inter_bw_measured_gbps=col("inter_bw_measured_gbps"),
        availability=np.where(np.isnan(col("availability")), 1.0, col("availability")),
        idle_rate=col("idle_rate"), queue_delay_s=col("queue_delay_s"),
    )
    return m, list(classes)


def is_available(record: dict, now: float, timeout_s: float) -> bool:
    """Up (or leaving: still running its work while it drains), and heard from within the timeout."""
    return record.get("status", "up") in ("up", "leaving") and now - record["received_at"] <= timeout_s


@dataclass
class Metered:
    """One metering pass over the reports: the metrics, class names, availability, and per task kind
    the compute score [N] and the dimension scores [N, D] (unrounded)."""

    metrics: NodeMetrics
    classes: list[str]
    available: np.ndarray
    scores: dict[str, np.ndarray]
    dims: dict[str, np.ndarray]
    work_tflops: np.ndarray  # [N] compute in standard units at the training precision (economy, energy)


def meter(records: list[dict], conversion, benchmark_work, now: float, timeout_s: float,
          model: MeteringModel = DEFAULT_METERING) -> Metered:
    m, classes = node_metrics(records, conversion, benchmark_work, now)
    available = np.array([is_available(r, now, timeout_s) for r in records], bool)
    m.availability = np.where(available, m.availability, 0.0)
    scores = {k: compute_scores(m, k, model) for k in TASK_KINDS}
    scores.update({cluster_key(k): compute_scores(m, k, model, "cluster") for k in TASK_KINDS})
    work = compute_capability(m, model.precision("training"), model)
    waste = economy_factor(m, model, work)  # economy: the class score scaled down on stronger cards
    scores.update({economy_key(k): scores[k] * waste for k in TASK_KINDS})
    return Metered(m, classes, available, scores, {k: dimensions(m, k, model) for k in TASK_KINDS}, work)


def cluster_key(kind: str) -> str:
    """The key of a kind's compute score against every node (standard units across classes)."""
    return f"{kind}@cluster"


def economy_key(kind: str) -> str:
    """The key of a kind's compute score for frugal work (core.metering.economy_scores)."""
    return f"{kind}@economy"


SCORE_COLUMNS = (*TASK_KINDS, *(cluster_key(k) for k in TASK_KINDS), *(economy_key(k) for k in TASK_KINDS))
SCORE_COLUMN = {key: i for i, key in enumerate(SCORE_COLUMNS)}  # NodeView.compute's column of a score key


def scored(records: list[dict], conversion, benchmark_work, now: float, timeout_s: float,
           model: MeteringModel = DEFAULT_METERING) -> list[dict]:
    """Every node's report with availability, dimension scores and compute score per task kind."""
    if not records:
        return []
    mt = meter(records, conversion, benchmark_work, now, timeout_s, model)
    known = set(ACCELERATORS) | set(conversion)
    return [{
        "node": r["node"],
        "class": mt.classes[mt.metrics.node_class[i]],
        "available": bool(mt.available[i]),
        "compute_score": {k: round(float(mt.scores[k][i]), 4) for k in TASK_KINDS},
        "dimensions": {k: {d: round(float(mt.dims[k][i, j]), 4) for j, d in enumerate(DIMENSIONS)}
                       for k in TASK_KINDS},
        "report": {k: v for k, v in r.items() if k not in ("received_at", "first_seen_at")},
        "first_seen": r.get("first_seen_at") or r["received_at"],
        "last_seen": r["received_at"],
        "age_s": round(now - r["received_at"], 3),
        "warnings": compute_warnings(r, float(mt.work_tflops[i]), known),
    } for i, r in enumerate(records)]


NO_COMPUTE_FIGURES = ("no compute figures (peak_tflops, tensor_cores with clock_mhz, or a fresh benchmark): its "
                      "compute score rests on memory, interconnect and availability only, so it cannot be told "
                      "apart from a faster or slower card")


def compute_warnings(record: dict, work_tflops: float, known=ACCELERATORS) -> list[str]:
    """What an operator should fix in a node's report: an accelerator node whose compute nothing
    measures or states (every such node would score alike, an H100 as an L40S), and an accelerator
    model of neither the datasheets' table nor the conversion table (``known``: their models)."""
    out = []
    model = record.get("accel_model")
    if model and float(record.get("cards") or 0) > 0 and model not in known:
        out.append(f"accel_model {model!r} is not a model cnsched knows ({', '.join(sorted(known))}): no "
                   "datasheet fills its peaks, and peaks it reports are read as dense; name one of these models "
                   "or add it to CNSCHED_MODEL_CONVERSION")
    if float(record.get("cards") or 0) > 0 and not work_tflops > 0:
        out.append(NO_COMPUTE_FIGURES)
    return out


@dataclass
class NodeView:
    """The inventory as the scheduler's arrays (one row per node, ids sorted)."""

    ids: list[str]
    index: dict[str, int]
    compute: np.ndarray  # float32[N, 3K]: per task kind within its class, across all, for frugal work (SCORE_COLUMNS)
    capacity: np.ndarray  # float32[N, 3] cards, accelerator memory GB, host memory GB
    usable: np.ndarray  # float32[N, 3] capacity (the scheduler subtracts its books and bounds it by reports)
    reported_free: np.ndarray  # float64[N, 3] what the node reports free (NaN where it does not say)
    report_at: np.ndarray  # float64[N] when its report was received
    available: np.ndarray  # bool[N]
    reported_down: np.ndarray  # bool[N] the node says it is down
    node_class: np.ndarray  # int64[N] code into class_names
    class_names: list[str]
    has_accel: np.ndarray  # bool[N]
    link_gbps: np.ndarray  # float32[N] interconnect (measured if known)
    queue_s: np.ndarray  # float64[N] queueing delay at the node
    joined_at: np.ndarray  # float64[N] when the scheduler first saw the node
    energy: np.ndarray  # float64[N] energy score 0-100 (core.energy; 50 where unknown)
    racks: list[str] = field(default_factory=list)  # each node's rack endpoint, scoped by site (rack_endpoint)
    rack_aliases: list[str] = field(default_factory=list)  # the same unscoped (``rack:<rack>``), what probes may name
    regions: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # each node's region ("" unknown)
    tiers: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # centre, province, edge or ""
    sites: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # zone, else region (power ramps)
    # each node's workload manager cluster (its report's ``slurm_cluster``), a code into cluster_names
    clusters: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cluster_names: list[str] = field(default_factory=list)  # "" for nodes no cluster claims
    power_kw: np.ndarray = field(default_factory=lambda: np.zeros(0))  # full-load draw (NaN: not reported)
    speed: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per-card compute / the pool's slowest card's (core.ect)
    card_models: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # accel_model ("" unknown): core.speeds
    at: float | None = None  # the time the view is for (what the scheduler ages paths to)
    leaving: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # the node reports status leaving
    # maintenance, set by the scheduler (streams.worker.scheduling.maintenance): no new work (cordoned,
    # draining or leaving); its work to move; since when and by when
    closed: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    draining: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    drain_since: np.ndarray = field(default_factory=lambda: np.zeros(0))
    drain_due: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def speeds(self) -> np.ndarray:
        """float64[N]: each node's card speed (``speed``), 1 on every node of a view built without it."""
        n = len(self.ids)
        return self.speed.astype(np.float64, copy=False) if self.speed.size == n else np.ones(n)


def _clusters(records: list[dict]) -> dict:
    """``clusters`` (int64 codes) and ``cluster_names`` of the reports' ``slurm_cluster``."""
    names = [str(r.get("slurm_cluster") or "") for r in records]
    distinct = sorted(set(names))
    at = {x: k for k, x in enumerate(distinct)}
    return {"clusters": np.array([at[x] for x in names], np.int64), "cluster_names": distinct}


def _col(records: list[dict], key: str, default: float = math.nan) -> np.ndarray:
    return np.array([default if r.get(key) is None else float(r[key]) for r in records], np.float64)


def node_view(records: list[dict], conversion, benchmark_work, now: float, timeout_s: float,
              first_seen: dict[str, float], carbon_weight: float = 0.5) -> NodeView:
    """Arrays of the scheduler from the reports (``first_seen`` gains the nodes seen for the first time)."""
    ids = [r["node"] for r in records]
    n = len(ids)
    mt = meter(records, conversion, benchmark_work, now, timeout_s) if n else None
    compute = (np.stack([mt.scores[k] for k in SCORE_COLUMNS], axis=1) if n else np.zeros((0, len(SCORE_COLUMNS))))
    cards = _col(records, "cards", 0.0)
    capacity = np.stack([cards, cards * _col(records, "mem_gb", 0.0), _col(records, "host_mem_gb", 0.0)], axis=1)
    free = np.array([[(r.get("free") or {}).get(f) for f in ("cards", "mem_gb", "host_mem_gb")] for r in records],
                    dtype=np.float64).reshape(n, 3)
    link = np.array([r.get("inter_bw_measured_gbps") or r.get("inter_bw_gbps") or DEFAULT_LINK_GBPS
                     for r in records], np.float32)
    return NodeView(
        ids=ids, index={x: i for i, x in enumerate(ids)}, compute=compute.astype(np.float32),
        capacity=capacity.astype(np.float32), usable=capacity.astype(np.float32), reported_free=free,
        report_at=_col(records, "received_at", now),
        available=mt.available if n else np.zeros(0, bool),
        reported_down=np.array([r.get("status") == "down" for r in records], bool),
        node_class=mt.metrics.node_class if n else np.zeros(0, np.int64), class_names=mt.classes if n else [],
        has_accel=cards > 0, link_gbps=link, queue_s=_col(records, "queue_delay_s", 0.0),
        joined_at=np.array([r.get("first_seen_at") or first_seen.setdefault(x, now) for x, r in zip(ids, records,
                                                                                                    strict=True)],
                           np.float64),
        energy=energy_scores(_col(records, "energy_price_per_mwh"), _col(records, "carbon_g_per_kwh"),
                             _col(records, "power_kw"), carbon_weight,
                             mt.work_tflops if n else None),
        racks=[rack_endpoint(r.get("rack") or "", r.get("zone") or r.get("region") or "") for r in records],
        rack_aliases=[rack_endpoint(r.get("rack") or "") for r in records],
        regions=np.array([r.get("region") or "" for r in records], object),
        tiers=np.array([r.get("tier") or "" for r in records], object),
        sites=np.array([r.get("zone") or r.get("region") or "" for r in records], object),
        **_clusters(records),
        power_kw=_col(records, "power_kw"),
        speed=card_speed(mt.work_tflops, cards, cards > 0) if n else np.zeros(0),
        card_models=np.array([r.get("accel_model") or "" for r in records], object),
        leaving=np.array([r.get("status") == "leaving" for r in records], bool),
        closed=np.zeros(n, bool), draining=np.zeros(n, bool), drain_since=np.full(n, np.inf),
        drain_due=np.full(n, np.inf),
    )
