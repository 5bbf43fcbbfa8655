"""Compute metering: every node described in comparable units, then scored 0-100 within its class.

Vendor figures are not comparable as stated (sparse vs dense TFLOPS, precisions): each node's
stated per-card peaks are multiplied by a per-model conversion factor (configuration) to standard
dense units. A recent measured benchmark beats a theoretical peak: compute capability is
``benchmark value x work per unit`` (e.g. samples/s x FLOP per sample) when the benchmark is younger
than ``max_benchmark_age_s``, otherwise ``cards x peak x factor x peak_efficiency`` (peaks are never
reached; the efficiency puts both on one footing).

Dimensions (each normalised within the node's class: value / best value in the class x 100; or,
with ``scope="cluster"``, within all nodes, so that standard units compare across classes):
- compute: capability at the task's precision;
- storage: 0.5 card memory capacity + 0.3 card memory bandwidth + 0.2 host memory bandwidth;
- interconnect: 0.5 intra-node + 0.5 inter-node bandwidth (measured effective when known, else
  theoretical x ``link_efficiency``);
- quality (absolute): 100 x (0.5 availability + 0.3 idle rate + 0.2 (1 - queueing delay / bad delay)).
A task type weighs the dimensions (training: compute first; inference: storage first); the weighted
sum is normalised once more within the class so that its best node scores exactly 100 and the others
proportionally. Unknown values (NaN) count as nothing.

Tensor cores and clock (``tensor_cores`` and ``clock_mhz`` of a report, per card): a report without
an fp16 peak gets one from them, ``tensor cores x clock x dense fp16 FLOP per tensor core per clock``
of its model's generation (``TENSOR_FLOP_PER_CLOCK``: an A100's 432 cores at 1,410 MHz x 512 = 311.9
TFLOPS, its datasheet's 312); and a card reporting a clock below its model's boost clock
(``BOOST_CLOCK_MHZ``: power capping, thermal throttling) has its peaks scaled by clock / boost. A
benchmark is measured, so it is never scaled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PRECISIONS = ("fp32", "fp16", "int8")
DIMENSIONS = ("compute", "storage", "interconnect", "quality")

DEFAULT_TASK_WEIGHTS: dict[str, dict[str, float]] = {
    "training": {"compute": 0.50, "storage": 0.15, "interconnect": 0.25, "quality": 0.10},
    "inference": {"compute": 0.30, "storage": 0.40, "interconnect": 0.10, "quality": 0.20},
    "generic": {"compute": 0.40, "storage": 0.25, "interconnect": 0.20, "quality": 0.15},
}
DEFAULT_TASK_PRECISION = {"training": "fp16", "inference": "int8", "generic": "fp32"}


# Per accelerator model, per card, as its vendor's datasheet states it: peaks in TFLOPS (int8 in
# TOPS; fp16 and int8 with 2:4 sparsity where ``sparse``, as NVIDIA quotes them since Ampere's
# successors; None where the datasheet gives none), memory in GB, and the datasheet.
@dataclass(frozen=True)
class Accelerator:
    peaks: dict
    sparse: bool
    mem_gb: float
    source: str


ACCELERATORS: dict[str, Accelerator] = {
    "A100-SXM": Accelerator({"fp32": 19.5, "fp16": 312.0, "int8": 624.0}, False, 80.0,
                            "NVIDIA A100 Tensor Core GPU datasheet (2021), dense column"),
    "A100-PCIE": Accelerator({"fp32": 19.5, "fp16": 312.0, "int8": 624.0}, False, 80.0,
                             "NVIDIA A100 Tensor Core GPU datasheet (2021), dense column"),
    "H100-SXM": Accelerator({"fp32": 67.0, "fp16": 1979.0, "int8": 3958.0}, True, 80.0,
                            "NVIDIA H100 Tensor Core GPU datasheet (2023)"),
    "H100-PCIE": Accelerator({"fp32": 51.0, "fp16": 1513.0, "int8": 3026.0}, True, 80.0,
                             "NVIDIA H100 Tensor Core GPU datasheet (2022)"),
    "H100-NVL": Accelerator({"fp32": 60.0, "fp16": 1671.0, "int8": 3341.0}, True, 94.0,
                            "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 NVL column"),
    "H200-SXM": Accelerator({"fp32": 67.0, "fp16": 1979.0, "int8": 3958.0}, True, 141.0,
                            "NVIDIA H200 Tensor Core GPU datasheet (2024)"),
    "B200": Accelerator({"fp32": 75.0, "fp16": 4500.0, "int8": 9000.0}, True, 180.0,
                        "NVIDIA HGX B200 specifications (2024), per GPU"),
    "GB200": Accelerator({"fp32": 80.0, "fp16": 5000.0, "int8": 10000.0}, True, 186.0,
                         "NVIDIA GB200 NVL72 specifications (2024), per Blackwell GPU"),
    "L40S": Accelerator({"fp32": 91.6, "fp16": 733.0, "int8": 1466.0}, True, 48.0,
                        "NVIDIA L40S datasheet (2023)"),
    "MI300X": Accelerator({"fp32": 163.4, "fp16": 1307.4, "int8": 2614.9}, False, 192.0,
                          "AMD Instinct MI300X accelerator datasheet (2023), dense"),
    "Gaudi3": Accelerator({"fp32": None, "fp16": 1835.0, "int8": None}, False, 128.0,
                          "Intel Gaudi 3 AI accelerator white paper (2024): BF16 matrix engines"),
}

# Per accelerator model: factor from the vendor's stated peak to standard dense units (0.5 where the
# datasheet quotes fp16 and int8 with 2:4 sparsity), from ACCELERATORS.
DEFAULT_MODEL_CONVERSION: dict[str, dict[str, float]] = {
    model: {"fp32": 1.0, "fp16": 0.5 if a.sparse else 1.0, "int8": 0.5 if a.sparse else 1.0}
    for model, a in ACCELERATORS.items()
}


def datasheet_peaks(model: str) -> dict | None:
    """The model's per-card peaks as its datasheet states them (precisions it gives none of left
    out), or None for a model ACCELERATORS does not hold."""
    a = ACCELERATORS.get(model)
    return None if a is None else {p: v for p, v in a.peaks.items() if v is not None}


# Dense fp16 FLOP one tensor core does per clock, by model (its generation): Volta 128, Ampere 512,
# Ada 256, Hopper 1,024 (datasheet dense fp16 TFLOPS / (tensor cores x boost clock)).
TENSOR_FLOP_PER_CLOCK: dict[str, float] = {
    "V100": 128.0, "A100-SXM": 512.0, "A100-PCIE": 512.0, "L40S": 256.0, "H100-SXM": 1024.0, "H100-PCIE": 1024.0,
    "H200-SXM": 1024.0,
}
# Boost clock (MHz) by model: a card reporting less runs its peaks at clock / boost.
BOOST_CLOCK_MHZ: dict[str, float] = {
    "V100": 1530.0, "A100-SXM": 1410.0, "A100-PCIE": 1410.0, "L40S": 2520.0, "H100-SXM": 1980.0,
    "H100-PCIE": 1755.0, "H200-SXM": 1980.0,
}


def tensor_peak_tflops(model: str, tensor_cores: float | None, clock_mhz: float | None) -> float | None:
    """Dense fp16 TFLOPS per card from tensor cores and clock, or None (a figure missing, model unknown)."""
    per_clock = TENSOR_FLOP_PER_CLOCK.get(model)
    if per_clock is None or not tensor_cores or not clock_mhz:
        return None
    return tensor_cores * clock_mhz * 1e6 * per_clock / 1e12


def clock_factor(model: str, clock_mhz: float | None) -> float:
    """clock / boost clock when a card reports running below its model's boost clock, else 1."""
    boost = BOOST_CLOCK_MHZ.get(model)
    if boost is None or not clock_mhz or clock_mhz >= boost:
        return 1.0
    return clock_mhz / boost


# Work per unit of a standard benchmark, in FLOP (so samples/s x FLOP/sample = FLOP/s).
DEFAULT_BENCHMARK_WORK: dict[str, float] = {
    "resnet50-train": 3 * 4.1e9,  # forward + backward, per image
    "resnet50-infer": 4.1e9,
    "bert-large-train": 3 * 2 * 340e6 * 512,  # per 512-token sequence
    "llama-7b-train": 6 * 7e9,  # per token: forward + backward
    "llama-7b-infer": 2 * 7e9,  # per token
    "llama-70b-infer": 2 * 70e9,
}


@dataclass(frozen=True)
class MeteringModel:
    task_weights: dict[str, dict[str, float]] = field(default_factory=lambda: dict(DEFAULT_TASK_WEIGHTS))
    task_precision: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TASK_PRECISION))
    peak_efficiency: float = 0.4
    link_efficiency: float = 0.8
    max_benchmark_age_s: float = 7 * 86400.0
    queue_bad_s: float = 600.0

    def weights(self, task_kind: str) -> np.ndarray:
        if task_kind not in self.task_weights:
            raise KeyError(f"unknown task kind {task_kind!r}; known: {', '.join(self.task_weights)}")
        w = np.array([self.task_weights[task_kind].get(d, 0.0) for d in DIMENSIONS])
        return w / w.sum()

    def precision(self, task_kind: str) -> int:
        return PRECISIONS.index(self.task_precision.get(task_kind, "fp32"))


DEFAULT_METERING = MeteringModel()


@dataclass
class NodeMetrics:
    """Arrays over n nodes, in standard units (GB, GB/s, Gbit/s, TFLOPS, seconds)."""

    node_class: np.ndarray  # int[n]: nodes are compared within their class
    cards: np.ndarray  # accelerators per node (0 for CPU-only)
    peak: np.ndarray  # [n, 3] stated per-card peak per precision (TFLOPS / TOPS)
    peak_factor: np.ndarray  # [n, 3] model conversion to standard dense units
    bench_value: np.ndarray  # measured throughput (samples/s, tokens/s), NaN if none
    bench_work: np.ndarray  # work per unit of bench_value (FLOP per sample/token)
    bench_age_s: np.ndarray  # age of the measurement
    mem_gb: np.ndarray  # per card
    mem_bw_gbs: np.ndarray  # per card
    host_mem_bw_gbs: np.ndarray
    intra_bw_gbps: np.ndarray  # theoretical card-to-card
    intra_bw_measured_gbps: np.ndarray  # NaN if unknown
    inter_bw_gbps: np.ndarray  # theoretical node-to-node
    inter_bw_measured_gbps: np.ndarray
    availability: np.ndarray  # 0..1
    idle_rate: np.ndarray  # 0..1
    queue_delay_s: np.ndarray


def _z(x: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)


def normalise_in_class(values: np.ndarray, node_class: np.ndarray) -> np.ndarray:
    """value / best value of the node's class x 100 (0 when the class best is 0)."""
    v = _z(values)
    cls = np.asarray(node_class, dtype=np.int64)
    if v.size == 0:
        return v
    best = np.zeros(int(cls.max()) + 1)
    np.maximum.at(best, cls, v)
    b = best[cls]
    return np.where(b > 0, v / np.where(b > 0, b, 1.0) * 100.0, 0.0)


def compute_capability(m: NodeMetrics, precision: int, model: MeteringModel = DEFAULT_METERING) -> np.ndarray:
    """Node throughput in TFLOPS-equivalent: fresh benchmark, else derated converted peak."""
    bench = _z(m.bench_value) * _z(m.bench_work) / 1e12
    fresh = (~np.isnan(np.asarray(m.bench_value, dtype=np.float64))) & (np.asarray(m.bench_age_s) <= model.max_benchmark_age_s) & (bench > 0)
    peak = _z(m.cards) * _z(m.peak[:, precision]) * _z(m.peak_factor[:, precision]) * model.peak_efficiency
    return np.where(fresh, bench, peak)


def _peers(m: NodeMetrics, scope: str) -> np.ndarray:
    """The group each node is normalised within: its class ("class") or one group of all ("cluster")."""
    return m.node_class if scope == "class" else np.zeros_like(np.asarray(m.node_class, dtype=np.int64))


def dimensions(m: NodeMetrics, task_kind: str, model: MeteringModel = DEFAULT_METERING,
               scope: str = "class") -> np.ndarray:
    """float64[n, 4]: compute, storage, interconnect, quality scores (0..100) per node, each against
    the best of the node's class (``scope`` "class") or of every node (``scope`` "cluster": standard
    units compared across classes)."""
    cls = _peers(m, scope)
    compute = normalise_in_class(compute_capability(m, model.precision(task_kind), model), cls)
    cards = _z(m.cards)
    storage = (0.5 * normalise_in_class(cards * _z(m.mem_gb), cls)
               + 0.3 * normalise_in_class(cards * _z(m.mem_bw_gbs), cls)
               + 0.2 * normalise_in_class(m.host_mem_bw_gbs, cls))

    def effective(measured, theoretical):
        measured = np.asarray(measured, dtype=np.float64)
        return np.where(np.isnan(measured), _z(theoretical) * model.link_efficiency, measured)

    interconnect = (0.5 * normalise_in_class(effective(m.intra_bw_measured_gbps, m.intra_bw_gbps), cls)
                    + 0.5 * normalise_in_class(effective(m.inter_bw_measured_gbps, m.inter_bw_gbps), cls))
    queue = np.clip(_z(m.queue_delay_s) / model.queue_bad_s, 0.0, 1.0)
    quality = 100.0 * (0.5 * _z(m.availability) + 0.3 * _z(m.idle_rate) + 0.2 * (1.0 - queue))
    return np.stack([compute, storage, interconnect, quality], axis=-1)


def compute_scores(m: NodeMetrics, task_kind: str, model: MeteringModel = DEFAULT_METERING,
                   scope: str = "class") -> np.ndarray:
    """Compute score 0..100 per node for a task kind: the best node of each class scores 100 (``scope``
    "class"), or the best node of all (``scope`` "cluster")."""
    dims = dimensions(m, task_kind, model, scope)
    raw = dims @ model.weights(task_kind)
    return normalise_in_class(raw, _peers(m, scope))


def economy_factor(m: NodeMetrics, model: MeteringModel = DEFAULT_METERING,
                   capability: np.ndarray | None = None) -> np.ndarray:
    """For work that needs little accelerator (fine-tuning, preprocessing): the weakest accelerator
    node's capability / this node's (training precision, standard units, every class), 1 for a node
    without accelerators (it wastes none). A kind's compute score times it is the economy score: the
    smallest card that fits keeps its score, a card k times stronger keeps 1 / k of it, so high-end
    cards are not wasted on such work, and among alike cards the usual score (availability, idle rate,
    memory) decides. ``capability``: the nodes' compute at the training precision, when the caller
    has it already."""
    cap = compute_capability(m, model.precision("training"), model) if capability is None else capability
    has = cap > 0
    if not has.any():
        return np.ones(cap.shape)
    return np.where(has, cap[has].min() / np.where(has, cap, 1.0), 1.0)


def economy_scores(m: NodeMetrics, task_kind: str, model: MeteringModel = DEFAULT_METERING) -> np.ndarray:
    """The kind's compute score within the class x :func:`economy_factor`."""
    return compute_scores(m, task_kind, model) * economy_factor(m, model)
