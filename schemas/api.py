"""Every body the worker's HTTP API answers with, as a model. The JSON on the wire is the model's
``body()``: field names as listed (``class``, ``from`` via aliases), fields left unset omitted."""

from __future__ import annotations

import json
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.routes import Routes

T = TypeVar("T")


class ApiModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    def body(self) -> dict:
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class RoutesAnswer(Routes, ApiModel):
    """GET /services/{id}/routes: a service's routing weights, as sched.routes carries them."""


class FieldError(ApiModel):
    field: str
    value: Any = None
    reason: str


M = TypeVar("M", bound=BaseModel)


def read_body(model: type[M], raw: bytes, required: bool = True) -> M:
    """An HTTP request body as ``model``, with exactly the JSON types /openapi.json names: ``"1"`` is
    not a number and ``0`` not a boolean (pydantic's strict mode), while a number with a zero
    fraction (``4.0``) is the integer JSON Schema says it is. ValidationError as pydantic raises it
    (``json_invalid`` for what is not JSON, nesting too deep included; ``missing`` at ``body`` for
    no body where one is ``required``; an optional one absent is ``{}``)."""
    if not raw and required:
        raise ValidationError.from_exception_data(model.__name__, [{"type": "missing", "loc": ("body",),
                                                                     "input": None}])
    try:
        doc = json.loads(raw or b"{}", parse_float=_integral, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # NaN and Infinity too: JSON has no such numbers
        raise ValidationError.from_exception_data(model.__name__, [{
            "type": "json_invalid", "loc": (), "input": raw[:200].decode(errors="replace"),
            "ctx": {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}}]) from None
    # validated as JSON again, not as the Python objects: pydantic's strict mode for JSON input takes
    # enums, dates and UUIDs from strings, which its Python mode refuses (the second parse is cheap
    # next to the first, and bodies are at most 1 MiB: streams/web/guard.py)
    return model.model_validate_json(json.dumps(doc), strict=True)


def _integral(text: str) -> float | int:
    x = float(text)
    return int(x) if x.is_integer() and abs(x) < 2**63 else x


def _no_constant(text: str):
    raise ValueError(f"{text} is not JSON")


def field_errors(exc: ValidationError) -> list[dict]:
    """pydantic's errors as ``[{"field", "reason"}]`` (the shape of 422 answers and dead letters)."""
    return [{"field": ".".join(str(x) for x in e["loc"]) or "body", "reason": e["msg"]} for e in exc.errors()]


class ErrorBody(ApiModel):
    """``error`` says what went wrong; ``fields`` which request fields and why (400, 422); other keys
    name the unknown entity (404) or how much history is missing (409)."""

    model_config = ConfigDict(extra="allow")
    error: str
    fields: list[FieldError] | None = None
    detail: str | None = None


class Page(ApiModel, Generic[T]):
    items: list[T]
    total: int
    offset: int
    limit: int


class Health(ApiModel):
    """GET /health (= /health/ready) and /health/live: 503 with the problems when not ready."""

    status: Literal["ok", "not_ready"] = "ok"
    app: str
    problems: list[str] = []

    def body(self) -> dict:
        return self.model_dump(mode="json", exclude={"problems"} if not self.problems else None)


class PathAnswer(ApiModel):
    """GET /network/paths/{src}/{dst}: the latest window statistics of a path and its quality."""

    src: str
    dst: str
    quality: float | None
    quality_by_profile: dict[str, float | None]
    dimensions: dict[str, float | None]
    inputs: dict[str, float | None]
    metrics: dict[str, dict]
    window_start: float | None
    window_end: float | None
    age_s: float | None
    freshness: Literal["fresh", "aging", "stale"] = Field(
        default="fresh", description="fresh: fully trusted; aging: quality drawn towards unknown (50) by the "
        "lost confidence; stale: no window for CNSCHED_PATH_STALE_SECONDS, quality unknown (null)")
    confidence: float = Field(default=1.0, ge=0, le=1, description="how far the quality is trusted (1 fresh, 0 stale)")


class NodeAnswer(ApiModel):
    """GET /network/nodes/{node}: NIC utilisation, retransmissions, mean quality to its peers."""

    node: str
    bw_util: float | None
    retrans_rate: float | None
    mean_quality_to_peers: float | None
    peers: int
    worst_peer: str | None
    metrics: dict[str, dict]
    window_start: float | None
    window_end: float | None
    age_s: float | None


class ComputeAnswer(ApiModel):
    """GET /compute/nodes/{node}: the node's report, availability and scores per task kind."""

    node: str
    node_class: str = Field(alias="class")
    available: bool
    compute_score: dict[str, float]
    dimensions: dict[str, dict[str, float]]
    report: dict
    first_seen: float | None = Field(default=None, description="when the worker first had a report of the node "
                                     "(kept over restarts: a move to a node that joined later says node_joined)")
    last_seen: float
    age_s: float
    warnings: list[str] = Field(default_factory=list, description=(
        "what to fix in the node's report, e.g. an accelerator node without compute figures"))
    state: str | None = Field(default=None, description=(
        "as the scheduler holds it: up, cordoned (no new placements), draining (its work moves at its next "
        "checkpoint), down (failed, silent, or reported down)"))
    state_reason: str | None = Field(default=None, max_length=2048, description=(
        "why it is in that state (as Slurm's sinfo -R): down: the failure (no report for how long, reported down, "
        "every path lost); cordoned or draining: the action, who, when, the drain's deadline and the operator's "
        "reason; up: a note when its paths are all lost on too many nodes at once (the probes are suspect)"))
    cards: int | None = Field(default=None, description="the node's cards")
    cards_reported_free: int | None = Field(default=None, description="free cards in the node's own last report")
    cards_booked: int | None = Field(default=None, description="cards cnsched has booked on the node")
    cards_free: int | None = Field(default=None, description=(
        "cards cnsched would give out now: its books, bounded by a fresh report (0 unless up)"))
    tasks: list[str] | None = Field(default=None, description="tasks holding cards on the node")


class ForecastPoint(ApiModel):
    t: float
    value: float  # p50
    upper: float | None = None  # the forecaster's upper quantile (``quantile`` of the answer)


class ForecastAnswer(ApiModel):
    """GET /forecast/paths/{src}/{dst} (``src``, ``dst``) or /forecast/nodes/{node} (``node``)."""

    src: str | None = None
    dst: str | None = None
    node: str | None = None
    metric: str
    stat: str
    step_s: float
    horizon_s: float
    history_steps: int
    start: float = Field(alias="from")
    points: list[ForecastPoint]
    quantile: float | None = None  # of ``upper``
    seasonal: bool | None = None  # a daily profile was used (the series' own past showed it helps)
    history: list[ForecastPoint] | None = None  # with ?history=: the newest past steps (value only)


class PowerSizing(ApiModel):
    """GET /power/{site}/smoothing: battery sizing of the site's stored power (core.battery)."""

    model_config = ConfigDict(extra="allow")  # the curves: target_mw, compensation_mw
    power_capacity_mw: float
    discharge_energy_kwh: float
    charge_energy_kwh: float
    soc_swing_kwh: float
    window_discharge_kwh: float
    recommended_energy_kwh: float
    original_max_ramp_mw_per_min: float
    smoothed_max_ramp_mw_per_min: float
    smoothing_rate_pct: float
    target_max_ramp_mw_per_min: float
    ramp_limit_met: bool
    site: str
    start: float = Field(alias="from")
    to: float
    samples: int
    gaps_filled: int
    interval_s: float
    window_samples: int
    margin: float
    dod: float
    ramp_limit_mw_per_min: float | None
    target: Literal["block", "trailing"]


class RunningState(ApiModel):
    """What the scheduler needs to resume a running task after a restart."""

    alpha: float
    profile: str
    placed_at: float
    baseline_p95: float | None
    cooldown_until: float = 0.0
    moves: int = 0
    baseline_loss: float | None = None
    seen_window_end: float | None = None
    checkpoint_at: float | None = None
    checkpoint_gb: float | None = None
    restarts: int = 0
    started: bool = False  # a runner reported it started where it runs (no start timeout after a restart)
    ran_s: float = 0.0  # time it ran at its earlier placements
    start_at: float = 0.0  # not to start before (power-aware starts)


class ServiceState(ApiModel):
    """A scaled service's replicas and its last load, what a restarted scheduler resumes it from."""

    replicas: list[str] = []
    standby: list[str] = []
    next_index: int = 0
    busy: float | None = None  # replicas' worth of work at the last report (utilisation x replicas)
    slow: float | None = None  # the last reported p95 latency x the replicas it was over
    request_rate: float | None = None
    reported_at: float | None = None
    recent: list[list[float]] = []  # [time, replicas recommended] within the scale-down delay


class TaskEstimate(ApiModel):
    """GET /tasks/{id}, live from the scheduler: when a queued task should start (it holds the queue's
    reservation) and when a task should end, from the running tasks' declared durations; for a queued
    task, what it waits for (``reason``, ``basis``) and its place in the queue."""

    start: float | None = None
    end: float | None = None
    reserved_nodes: list[str] = []
    basis: str
    reason: str | None = Field(default=None, description=(
        "a queued task: the one thing it waits for — held, quota (its team's maximum), resources (too few "
        "nodes with room now), reservation (the free nodes are promised to the task first in line), "
        "network (a gang that fits only on nodes far from each other, waiting for closer ones), retrying (it "
        "fits: placed at the next retry), never (fewer nodes than it needs pass the checks that depend only on "
        "the cluster — class, capacity, regions and tiers: it cannot run on the cluster as it is). The basis of "
        "resources and never names the nodes each check rules out"))
    position: int | None = Field(default=None, description="a queued task: its place in the service order (1: next)")


class TaskRecord(ApiModel):
    """GET /tasks/{id}, and the value of the `tasks` table: the task, its status, where it runs, and
    its history (``{"decision": ...}``, ``{"reschedule": ...}``, ``{"event": ...}``, newest last, 50 kept)."""

    task: dict
    status: Literal["queued", "held", "placed", "running", "finished", "failed", "expired", "rejected", "cancelled"]
    nodes: list[str] = []
    running: RunningState | None = None
    service: ServiceState | None = None
    history: list[dict] = []
    estimate: TaskEstimate | None = None

    def body(self) -> dict:  # every field, also when unset (the table's records always had them); the
        # estimate only when GET /tasks/{id} computed one (it is never stored)
        return self.model_dump(mode="json", by_alias=True, exclude=None if self.estimate else {"estimate"})


class QueueRow(ApiModel):
    """One team and accelerator class of the queue (Kueue's ClusterQueue view): what waits and what runs."""

    team: str
    accel_class: str = Field(description="the class a queued task asks for (several joined by '|', * any); a "
                             "running task's: its node's")
    queued: int
    queued_cards: int
    running: int
    running_cards: int


class SummaryAnswer(ApiModel):
    """GET /summary: the cluster's totals as the scheduler holds them (the dashboard's header), not a page."""

    tasks: dict[str, int] = Field(description="task records by status, all of them")
    nodes: dict[str, int] = Field(description="nodes by state: up, cordoned, draining, down")
    cards_up: int = Field(description="cards of the nodes that are not down (capacity now)")
    cards_booked: int
    cards_free: int = Field(description="cards the scheduler would give out now")
    queues: list[QueueRow]


class IncidentsAnswer(ApiModel):
    """GET /incidents: the node failures the scheduler holds open now (the ``sched.incidents`` shape);
    recovered ones are in DuckDB (``cnsched report incidents``)."""

    open: list[dict]


class TaskCommand(ApiModel):
    """DELETE /tasks/{id} and POST /tasks/{id}/hold|release: who asks and why (both optional)."""

    model_config = ConfigDict(extra="forbid")
    by: str | None = Field(default=None, max_length=128)
    reason: str | None = Field(default=None, max_length=1024)


class TaskPriorityCommand(TaskCommand):
    """POST /tasks/{id}/priority: the new priority, and who asks and why."""

    priority: int = Field(ge=0, le=100)


class NodeCommandBody(ApiModel):
    """POST /nodes/{node}/cordon|uncordon: who asks and why (both optional)."""

    model_config = ConfigDict(extra="forbid")
    by: str | None = Field(default=None, max_length=128)
    reason: str | None = Field(default=None, max_length=1024)


class DrainBody(NodeCommandBody):
    """POST /nodes/{node}/drain: who asks and why, and how long its work may wait for a checkpoint."""

    deadline_s: float | None = Field(default=None, ge=0, le=10 * 366 * 86_400, allow_inf_nan=False, description=(
        "how long the node's work may wait for a checkpoint (default CNSCHED_DRAIN_DEADLINE_SECONDS)"))


class TaskAnswer(ApiModel):
    """POST /tasks: the decision once made (200), or accepted without one yet (202)."""

    task_id: str
    status: str
    nodes: list[str] | None = None
    decision: dict | None = None
    detail: str | None = None


class QuotaUsage(ApiModel):
    """A team's cards of one class (``*``: of any class) against its quota."""

    team: str
    accel_class: str
    guaranteed_cards: float
    max_cards: float | None = None
    used_cards: float
    borrowed_cards: float = Field(description="used beyond the guarantee: reclaimable by preemption")
    queued_tasks: int = 0


class QuotaAnswer(ApiModel):
    """GET /quotas (and PUT /quotas once applied): the set in force, what each team uses of it, and
    the last refused change."""

    quotas: list[dict]
    changed_at: float | None = None
    usage: list[QuotaUsage] = []
    rejected: dict | None = None
