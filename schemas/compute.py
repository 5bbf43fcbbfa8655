"""Compute reports on `compute.nodes`: inventory and benchmark results of one node, one JSON object.

Unknown fields are kept (and shown back) but not scored. Impossible values — a negative bandwidth,
availability outside [0, 1], a NaN or infinite figure — are rejected with the field and the reason.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

NODE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


def node_class(report: dict) -> str:
    """The class a node is scored within and that tasks name in ``accel_classes``: its stated
    accelerator class, else its model, else ``cpu`` without cards (``unknown`` with cards)."""
    return report.get("accel_class") or report.get("accel_model") or ("cpu" if not report.get("cards") else "unknown")

NonNeg = Field(default=None, ge=0)


class Peaks(BaseModel):
    """Per-card vendor peaks (TFLOPS; TOPS for int8), as the vendor states them."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fp32: float | None = NonNeg
    fp16: float | None = NonNeg
    int8: float | None = NonNeg


class Benchmark(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=128, description="standard workload, e.g. resnet50-train")
    value: float = Field(gt=0, description="measured throughput in `unit`")
    unit: str = Field(default="samples/s", min_length=1, max_length=64)
    measured_at: float = Field(gt=0, description="epoch seconds")


class Free(BaseModel):
    """Resources free for new work right now."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    cards: int | None = Field(default=None, ge=0, le=1024)
    mem_gb: float | None = NonNeg
    host_mem_gb: float | None = NonNeg


class ComputeReport(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    node: str = Field(pattern=NODE_ID_PATTERN)
    ts: float = Field(gt=0, description="epoch seconds of the report")
    status: Literal["up", "leaving", "down"] = "up"
    region: str = Field(default="", max_length=128)
    zone: str = Field(default="", max_length=128)
    rack: str = Field(default="", max_length=128)
    address: str | None = Field(default=None, max_length=255, pattern=r"^[A-Za-z0-9.:_\[\]-]+$", description=(
        "host or IP its services are reached at (a load balancer's server address for the replicas on it)"))
    tier: Literal["", "centre", "province", "edge"] = Field(
        default="", description="where the node sits in the compute network: a central data centre, a provincial "
                                "(regional) one, or the edge near users")
    accel_model: str = Field(default="", max_length=128, description="e.g. H100-SXM; keys the conversion table")
    accel_class: str = Field(default="", max_length=128, description="nodes are compared within a class; default: model")
    cards: int = Field(default=0, ge=0, le=1024)
    peak_tflops: Peaks = Field(default_factory=Peaks)
    tensor_cores: int | None = Field(default=None, ge=0, le=10**7)
    clock_mhz: float | None = NonNeg
    benchmarks: list[Benchmark] = Field(default_factory=list, max_length=256)
    mem_gb: float | None = NonNeg
    mem_bw_gbs: float | None = NonNeg
    host_mem_gb: float | None = NonNeg
    host_mem_bw_gbs: float | None = NonNeg
    intra_bw_gbps: float | None = NonNeg
    intra_bw_measured_gbps: float | None = NonNeg
    inter_bw_gbps: float | None = NonNeg
    inter_bw_measured_gbps: float | None = NonNeg
    availability: float | None = Field(default=None, ge=0, le=1)
    idle_rate: float | None = Field(default=None, ge=0, le=1)
    queue_delay_s: float | None = NonNeg
    power_kw: float | None = Field(default=None, ge=0, description="the node's power draw at full load")
    energy_price_per_mwh: float | None = Field(default=None, ge=0, description="what its energy costs now")
    carbon_g_per_kwh: float | None = Field(default=None, ge=0, description="carbon intensity of its energy now")
    free: Free = Field(default_factory=Free)

    @property
    def node_class(self) -> str:
        return self.accel_class or self.accel_model or ("cpu" if self.cards == 0 else "unknown")

    def unknown_fields(self) -> dict:
        return dict(self.model_extra or {})
