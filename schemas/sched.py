"""Scheduling contracts: tasks (`sched.tasks`, POST /tasks), decisions (`sched.decisions`) and
reschedule events (`sched.reschedules`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.compute import NODE_ID_PATTERN as ID_PATTERN

# Bounds on every number a task or an event carries: finite is not enough (1e300 overflows a cost
# report; a timestamp of 4e307 is no time at all). Generous for any real job.
EPOCH_MAX = 4_102_444_800.0  # 2100-01-01: no timestamp is later
DURATION_MAX_S = 10 * 366 * 86_400.0  # ten years: no run, wait or save takes longer
SIZE_MAX_GB = 1e7  # 10 PB: no dataset, model, image or checkpoint is larger

# the words of core/vocabulary.py, spelled as literals (tests/test_vocabulary.py holds them equal)
TaskType = Literal[
    "training-data-parallel",
    "training-model-parallel",
    "fine-tune",
    "inference",
    "data-intensive",
    "preprocessing",
    "batch-analytics",
]
NetworkProfile = Literal["balanced", "latency", "bandwidth", "duplex"]
Strategy = Literal["data-parallel", "model-parallel", "pipeline", "single"]
Trigger = Literal["degradation", "improvement", "node_joined", "forecast", "node_failed", "rollback", "drain",
                  "path_failed"]


class Resources(BaseModel):
    """What one worker of the task needs on its node."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cards: int = Field(default=0, ge=0, le=1024, description="accelerators")
    accel_mem_gb: float = Field(default=0.0, ge=0, description="accelerator memory, all cards together")
    host_mem_gb: float = Field(default=0.0, ge=0)
    accel_classes: list[Annotated[str, Field(max_length=128)]] = Field(
        default_factory=list, max_length=64, description="allowed accelerator classes; empty: any")


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    node: str = Field(pattern=ID_PATTERN, description="where the data or model lives (a node of the network view)")
    size_gb: float = Field(default=0.0, ge=0, le=SIZE_MAX_GB, description="how much the task loads from it")
    name: str | None = Field(default=None, pattern=ID_PATTERN, description=(
        "what is loaded (a dataset's or model's name): a copy staged at a site's store is found by it and "
        "reused by later tasks naming it; none: never staged"))


Tier = Literal["centre", "province", "edge"]


class Constraints(BaseModel):
    """Where a task may go beyond its resources: filters whose reasons show in the decision."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    regions: list[Annotated[str, Field(max_length=128)]] = Field(
        default_factory=list, max_length=64, description="data residency: only nodes in these regions; empty: any")
    tiers: list[Tier] = Field(default_factory=list, max_length=3, description="only nodes of these tiers; empty: any")
    group: str = Field(default="", max_length=128, description="tasks that keep apart (spread) share a group")
    spread: bool = Field(default=False, description=(
        "anti-affinity: not on a node a running task of the same group holds, while another node fits"))
    same_rack: bool = Field(default=False, description="affinity: a gang's workers all in one rack")


class Origin(BaseModel):
    """Where a share of a service's requests comes from (issue 54): its name, the probe endpoint whose
    paths to the replicas' nodes measure the delay from there (default: the name), and its share."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(pattern=ID_PATTERN, description="e.g. a region or site of the service's users")
    endpoint: str | None = Field(default=None, pattern=ID_PATTERN, description=(
        "the probe endpoint whose measured paths to the replicas' nodes are this origin's (default: name)"))
    share: float = Field(gt=0, le=1, description="of the service's requests; the origins' shares sum to 1")

    @property
    def probe(self) -> str:
        return self.endpoint or self.name


class Scaling(BaseModel):
    """An elastic service: the task describes one replica; the scheduler keeps between ``min_replicas``
    and ``max_replicas`` of them (tasks ``<id>.r<k>``, each placed and decided on its own) so that their
    reported utilisation stays near ``target_utilisation``, adds replicas ahead of the request rate it
    forecasts ``prescale_lead_s`` ahead, and keeps ``standby`` warm replicas loaded that serve at once
    when promoted. Load arrives as ``load`` events on ``sched.events`` under the service's id."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    min_replicas: int = Field(default=1, ge=0, le=1024)
    max_replicas: int = Field(default=8, ge=1, le=1024)
    target_utilisation: float = Field(default=0.6, gt=0, le=1, description="of the serving replicas' capacity")
    target_latency_ms: float | None = Field(default=None, gt=0, description=(
        "also scale so the reported p95 latency stays near this (the larger count of the two wins)"))
    standby: int = Field(default=0, ge=0, le=64, description=(
        "warm replicas kept loaded, not serving (with standby_cover: the fewest)"))
    standby_cover: float | None = Field(default=None, gt=0, lt=1, description=(
        "size the warm standby from the request history: replicas that, promoted, carry the request rate risen "
        "by this quantile (request-weighted) of the rises seen within cold_start_s; none: standby alone"))
    cold_start_s: float = Field(default=600.0, gt=0, le=86_400, description=(
        "how long a new replica takes to serve (image pull, model load): the rises a sized standby absorbs"))
    prescale_lead_s: float = Field(default=600.0, ge=0, le=86_400,
                                   description="scale for the request rate forecast this far ahead; 0: reactive only")
    scale_down_delay_s: float = Field(default=300.0, ge=0, le=86_400,
                                      description="fewer replicas only when fewer were wanted all this while")
    spread: bool = Field(default=True, description="replicas on distinct nodes while there are enough")
    origins: list[Origin] = Field(default_factory=list, max_length=64, description=(
        "where its requests come from: the routing weights (sched.routes) send each origin's requests to the "
        "replicas that answer them soonest; none: one origin, every replica as near"))
    replica_rate: float | None = Field(default=None, gt=0, le=1e9, description=(
        "requests/s one replica serves at full load (routing's capacity); default: learned from load reports"))
    port: int | None = Field(default=None, ge=1, le=65_535, description=(
        "the port a replica serves on (a load balancer's server address: the node's address and this port)"))

    @model_validator(mode="after")
    def _bounds(self):
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) is below min_replicas ({self.min_replicas})")
        names = [o.name for o in self.origins]
        if len(set(names)) != len(names):
            raise ValueError(f"origins: a name appears twice ({sorted(n for n in names if names.count(n) > 1)[0]})")
        total = sum(o.share for o in self.origins)
        if self.origins and abs(total - 1.0) > 1e-6:
            raise ValueError(f"origins: the shares sum to {total:.6g}, not 1")
        return self


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(pattern=ID_PATTERN)
    type: TaskType
    resources: Resources = Field(default_factory=Resources)
    peers: int = Field(default=1, ge=1, le=4096, description="workers placed together as a gang")
    strategy: Strategy | None = None
    data_source: Endpoint | None = None
    model_repo: Endpoint | None = None
    priority: int = Field(default=50, ge=0, le=100)
    preempts: bool = Field(default=False, description=(
        "without team quotas, this task may preempt running work of a lower priority (opt-in: with quotas "
        "set the quotas' rules decide; CNSCHED_PREEMPTION_PRIORITY opts in a whole priority class)"))
    team: str = Field(default="", max_length=128)
    alpha: float | None = Field(default=None, ge=0, le=1, description="compute weight; default from the type")
    network_profile: NetworkProfile | None = None
    submitted_at: float | None = Field(default=None, gt=0, le=EPOCH_MAX, description="epoch seconds")
    submitted_by: str | None = Field(default=None, max_length=128, description=(
        "who submitted it: set by the API to the name of the token it came with (CNSCHED_API_TOKENS); without "
        "tokens (the loopback), as given, else 'api'"))
    workload: str | None = Field(default=None, max_length=128, description=(
        "what it runs (a model and its setup, e.g. 'resnet50-bs64'): its runners' reported `throughput` on "
        "each card model teaches the scheduler this workload's speed there, where the newer card may gain "
        "it little or lose (core.speeds)"))
    expected_duration_s: float = Field(default=3600.0, gt=0, le=DURATION_MAX_S)
    time_limit_s: float | None = Field(default=None, gt=0, le=DURATION_MAX_S, description=(
        "the requested limit: the workload manager stops the task when it has run this long (the Slurm bridge: "
        "sbatch --time, whole minutes rounded up); none: no limit"))
    checkpoint_gb: float = Field(default=0.0, ge=0, le=SIZE_MAX_GB, description="state moved on a migration")
    cost_sensitivity: float = Field(
        default=0.0, ge=0, le=1,
        description="weight of the energy score (cheaper, greener nodes); 0: scores as without energy")
    deferrable_until: float | None = Field(
        default=None, gt=0, le=EPOCH_MAX, description=("epoch seconds: the task may be paused (preempted at a checkpoint) and "
                                         "resumed until then; it may borrow a tidal team's idle cards"))
    image: Endpoint | None = Field(default=None, description=(
        "the container image: where it is pulled from and how big; its pull counts in the load time"))
    users: Endpoint | None = Field(default=None, description=(
        "where the requests it answers come from (an inference replica's origin, set by its service): a path "
        "it uses all along, so its placement prefers nodes near it; nothing is loaded from there"))
    scaling: Scaling | None = Field(default=None, description="an elastic service of replicas of this task")
    constraints: Constraints | None = Field(default=None, description="residency, tiers, affinity, anti-affinity")
    command: str | None = Field(default=None, max_length=65_536, description=(
        "what a workload manager runs for each placement (the Slurm bridge: sbatch --wrap, one job per task or "
        "gang; it may save its checkpoint to $CNSCHED_CHECKPOINT_FILE)"))

    @model_validator(mode="after")
    def _service(self):
        if self.scaling is not None and self.peers != 1:
            raise ValueError("a scaled service's replicas are placed one by one: peers must be 1")
        if self.scaling is not None and len(self.id) > 120:
            raise ValueError("a scaled service's id is at most 120 characters (its replicas add .r<k>)")
        return self


class Candidate(BaseModel):
    node: str
    compute_score: float
    network_score: float
    alpha: float
    composite: float
    energy_score: float | None = Field(default=None, description="set when the task has a cost sensitivity")
    load_score: float | None = Field(default=None, description="set when the task loads data: its load time's "
                                     "score (0..100), which takes 0.3 of the composite")


class Staging(BaseModel):
    """A copy to make before the task loads (data follows compute): ``name`` from ``source`` to the
    ``target`` store at the placement's site, ``size_gb`` of it; the task then loads from ``target``."""

    name: str
    source: str
    target: str
    size_gb: float
    expected_s: float = Field(description="the copy's expected time over the measured path, seconds")


class DataAt(BaseModel):
    """Where a task reads its named data: a store holding a copy of ``name`` (made, or being made)."""

    name: str
    store: str


class Fallback(BaseModel):
    node: str
    reason: str


class ScalingChange(BaseModel):
    """A service's replicas changed (a `scaled` decision): new replicas have decisions of their own under
    their ids; removed ones are to be stopped; promoted standby replicas serve from now on."""

    from_replicas: int
    to_replicas: int
    reason: Literal["created", "utilisation", "latency", "forecast", "idle", "bounds", "replaced", "ended", "standby"]
    utilisation: float | None = Field(default=None, description="the last reported, over the serving replicas")
    request_rate: float | None = Field(default=None, description="the last reported, requests/s")
    forecast_rate: float | None = Field(default=None, description="requests/s forecast at the lead time")
    replicas: list[str] = Field(default_factory=list, description="the serving replicas' task ids")
    standby: list[str] = Field(default_factory=list, description="the warm standby replicas' task ids")
    added: list[str] = Field(default_factory=list, description="replicas placed now")
    removed: list[str] = Field(default_factory=list, description="replicas to stop")
    promoted: list[str] = Field(default_factory=list, description="standby replicas that serve from now on")


class Decision(BaseModel):
    task_id: str
    command: str | None = Field(default=None, description="the task's command, for the runner that starts it")
    status: Literal["placed", "unschedulable", "queued", "preempted", "scaled", "cancelled"]
    nodes: list[str] = Field(default_factory=list)
    alpha: float
    network_profile: NetworkProfile
    candidates: list[Candidate] = Field(default_factory=list, description="ranked, best first")
    rejected: dict[str, str] = Field(default_factory=dict, description="node -> filter reason")
    rejected_counts: dict[str, int] = Field(default_factory=dict)
    fallbacks: list[Fallback] = Field(default_factory=list)
    compute_only_nodes: list[str] = Field(default_factory=list, description="the choice with alpha = 1")
    compute_only_composite: float | None = Field(
        default=None, description="the composite (at the task's alpha) of the first compute-only node")
    compute_only_network_score: float | None = None
    state_version: int
    decided_at: float
    task_type: str | None = None
    submitted_at: float | None = None
    cards: int = Field(default=0, description="accelerators per worker")
    peers: int = 1
    cost_sensitivity: float = 0.0
    restarts: int = Field(default=0, description="times the task was re-queued after a failure")
    resume_from: float | None = Field(default=None, description="the checkpoint (its time) it resumes from")
    team: str = Field(default="", description="the task's team (quotas, fair share)")
    preempted_by: str | None = Field(default=None, description="preempted: the task it made room for")
    work_lost_s: float | None = Field(default=None, description="preempted: task time since its last checkpoint")
    scaling: ScalingChange | None = Field(default=None, description="scaled: how the service's replicas changed")
    load_gb: float = Field(default=0.0, description="placed: data, model and image each worker loads, summed "
                           "over the workers (transfer volume)")
    start_at: float | None = Field(default=None, description=(
        "placed: start no earlier than this (epoch s), so the sites' power ramps stay within their limits"))
    time_limit_s: float | None = Field(default=None, description="placed: the task's requested limit (its own)")
    expected_completion_s: float | None = Field(default=None, description=(
        "placed by the seconds rule (CNSCHED_PLACEMENT_RULE): the expected load + run there, seconds "
        "(core.ect: the expected duration on those cards and measured paths)"))
    checkpoint_phase_s: float | None = Field(default=None, description=(
        "with site ramp limits: checkpoint when (epoch seconds mod CNSCHED_CHECKPOINT_INTERVAL_SECONDS) "
        "reaches this, so the checkpoints at a site are spread over the interval"))
    staging: list[Staging] = Field(default_factory=list, description=(
        "copies to make before the task loads (placed: at its site, then it starts; queued: ahead, at the "
        "site it waits for); the runner copies, then the task loads from the target"))
    data_at: DataAt | None = Field(default=None, description=(
        "placed: the store whose copy of its named data the task was costed to read (a copy made, or being "
        "made, for it or an earlier task); the runner points the task there, after that copy if it is "
        "still being made"))
    waits_for: list[str] = Field(default_factory=list, description=(
        "queued: the nodes of the set it waits for, which free later (the seconds rule); a copy staged "
        "ahead is made on their side"))


class ScoreBreakdown(BaseModel):
    compute_score: float
    network_score: float
    composite: float


class RescheduleEvent(BaseModel):
    task_id: str
    from_nodes: list[str]
    to_nodes: list[str]
    trigger: Trigger
    expected_gain_s: float
    migration_cost_s: float
    transfer_gb: float = Field(default=0.0, description="state moved: the checkpoint, once per moving worker")
    start_at: float | None = Field(default=None, description="start at the target no earlier than this (site ramps)")
    before: ScoreBreakdown
    after: ScoreBreakdown
    state_version: int
    at: float


class TaskEvent(BaseModel):
    """A task's lifecycle on `sched.events`: started, refused (the node would not start it: the next
    candidate is tried), checkpoint (when it saved its state, how big, where), load (a scaled
    service's utilisation and request rate, under the service's id),
    finished (with duration and achieved throughput), failed (it is re-queued and resumes from its last
    checkpoint, up to CNSCHED_MAX_RESTARTS times), stopped (it stopped as a `cancelled` decision told
    it), progress (steps done of the run's total: what a move reads its remaining work from), staged (a
    decision's staging copies are made), loaded (how long its data took to load). Reported by whatever runs
    the task; the audit joins it to decisions.

    An operator's commands travel the same way (DELETE /tasks/{id}, POST /tasks/{id}/hold|release|
    priority, ``cnsched cancel|hold|release|priority``): cancel (a queued or held task ends; a placed
    or running one gets a `cancelled` decision its runner acts on), hold (a queued task is not placed
    until released), release, priority (a new priority, ``priority``); ``by`` and ``reason`` say who
    and why."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_id: str = Field(pattern=ID_PATTERN)
    event: Literal["started", "refused", "checkpoint", "finished", "failed", "load", "stopped", "progress",
                   "staged", "loaded", "cancel", "hold", "release", "priority", "delete"]
    at: float = Field(gt=0, le=EPOCH_MAX, description="epoch seconds")
    nodes: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(default_factory=list, max_length=4096)
    duration_s: float | None = Field(default=None, ge=0, le=DURATION_MAX_S, description=(
        "finished: its run time; checkpoint: how long the save took; started after a move or a restart: how "
        "long resuming from the checkpoint took (a move's cost counts the last two)"))
    throughput: float | None = Field(default=None, ge=0, le=1e15, description="achieved, in `unit`")
    unit: str = Field(default="samples/s", max_length=64)
    checkpoint_at: float | None = Field(default=None, gt=0, le=EPOCH_MAX, description="checkpoint: when the state was saved")
    checkpoint_gb: float | None = Field(default=None, ge=0, le=SIZE_MAX_GB, description="checkpoint: its size")
    checkpoint_location: str | None = Field(default=None, max_length=1024, description="checkpoint: where it is stored")
    utilisation: float | None = Field(default=None, ge=0, le=1, description="load: busy share of the serving replicas")
    request_rate: float | None = Field(default=None, ge=0, le=1e12, description="load: requests/s the service received")
    latency_ms: float | None = Field(default=None, ge=0, le=1e9, description="load: the service's p95 request latency")
    replicas: int | None = Field(default=None, ge=0, le=4096, description="load: replicas the utilisation is over")
    steps_done: int | None = Field(default=None, ge=0, le=10**15, description="progress: steps (or samples) done")
    steps_total: int | None = Field(default=None, ge=1, le=10**15, description=(
        "progress: steps in the whole run; with steps_done, the share done that a move's remaining work is read from"))
    load_s: float | None = Field(default=None, ge=0, le=DURATION_MAX_S, description=(
        "loaded: how long loading its data took on its nodes (staged: duration_s is the copy's time, and "
        "``staged`` lists the copies made, each {name, target})"))
    priority: int | None = Field(default=None, ge=0, le=100, description="priority: the task's new priority")
    by: str | None = Field(default=None, max_length=128, description="cancel, hold, release, priority: who asked")
    reason: str | None = Field(default=None, max_length=1024, description="cancel, hold, release, priority: why")

    @model_validator(mode="after")
    def _priority(self):
        if self.event == "priority" and self.priority is None:
            raise ValueError("a priority event carries the new priority")
        if self.event == "progress" and (self.steps_done is None or self.steps_total is None):
            raise ValueError("a progress event carries steps_done and steps_total")
        if self.steps_done is not None and self.steps_total is not None and self.steps_done > self.steps_total:
            raise ValueError("steps_done exceeds steps_total")
        return self
