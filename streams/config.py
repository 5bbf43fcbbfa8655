"""One configuration model for every process: environment variables with a ``CNSCHED_`` prefix,
plus ``KAFKA_BOOTSTRAP`` (use that cluster, start no broker)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.metering import DEFAULT_BENCHMARK_WORK, DEFAULT_MODEL_CONVERSION
from core.vocabulary import TASK_TYPES
from schemas.units import divides_day

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class ConfigError(ValueError):
    """Invalid configuration; the message lists every invalid field and why."""


class ApiToken(BaseModel):
    """A named token: its scope, the name every command and task it sends is recorded under, and whether
    it may name someone else (``by``: a bridge or a portal acting for its users)."""

    model_config = ConfigDict(extra="forbid")

    scope: Literal["read", "write"]
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
    act_for_others: bool = False


class Settings(BaseSettings):
    """Settings of a cnsched process. Every field is read from ``CNSCHED_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="CNSCHED_", extra="ignore", validate_default=True, populate_by_name=True
    )

    kafka_bootstrap: str | None = Field(
        default=None,
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP", "CNSCHED_KAFKA_BOOTSTRAP", "kafka_bootstrap"),
        description="host:port[,host:port]; set: use that cluster and start no broker",
    )
    app_id: str = Field(default="cnsched", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    topic_prefix: str = Field(
        default="", pattern=r"^[A-Za-z0-9._-]*$", description="prepended to every topic name"
    )
    kafka_create_topics: bool = Field(default=True, description=(
        "false: every topic is made by the operator beforehand, Faust's changelogs and its assignor topic "
        "included, and no client of ours asks the broker to create one (a missing topic stops the worker, "
        "naming it)"))
    partitions: int = Field(default=4, ge=1, le=1024)
    replication_factor: int = Field(default=1, ge=1, le=16)
    window_seconds: int = Field(default=10, ge=1, le=86_400)
    window_step_seconds: int = Field(default=10, ge=1, le=86_400)
    detector_step_seconds: float = Field(
        default=240.0, ge=0, le=86_400, description="the degradation detector remembers one rtt p95 per step of this "
        "many seconds (the last window's), as the labelled traces it was tuned on have one RTT per 4 minutes; "
        "0: one per window")
    allowed_lateness_seconds: float = Field(default=2.0, ge=0, le=3_600)
    max_clock_skew_seconds: float = Field(
        default=10.0, gt=0, le=86_400, description="samples further ahead of the worker's clock are dead-lettered: "
        "one sample can move its partition's event time at most this far past real time, and the partition's valid "
        "samples up to this much minus the allowed lateness behind it are then late; keep it near the lateness")
    max_sample_age_seconds: float = Field(
        default=7 * 86_400.0, gt=0, description="samples older than this (by the worker's clock) are rejected")
    max_message_bytes: int = Field(
        default=16 * 2**20, ge=1024, description="larger probe messages are dead-lettered unread")
    max_message_rows: int = Field(default=2_000_000, ge=1, description="probe messages with more rows: dead-lettered")
    hampel_k: float = Field(default=3.0, gt=0, description="outliers: |x - median| > k * 1.4826 * MAD")
    idle_close_seconds: float = Field(
        default=30.0, ge=0, description="a partition without messages this long: its event time follows the "
        "wall clock, so its windows close; 0: never")
    take_max_messages: int = Field(default=200, ge=1, le=100_000, description="messages per ingest step")
    take_within_seconds: float = Field(default=0.05, gt=0, le=10, description="longest wait to fill a step")
    flush_interval_seconds: float = Field(
        default=1.0, gt=0, le=60, description="how often window state is persisted and offsets acked"
    )
    web_host: str = Field(default="127.0.0.1", min_length=1, description="the API's address as other workers reach it")
    web_bind: str | None = Field(default=None, min_length=1, description="the address the API listens on; "
                                 "default CNSCHED_WEB_HOST")
    web_port: int = Field(default=6066, ge=1, le=65_535)
    api_tokens: dict[str, Literal["read", "write"] | ApiToken] | None = Field(
        default=None, repr=False, description='JSON {"<token>": "read" | "write" | {"scope", "name", '
        '"act_for_others"}}; state changes need a write token (none configured: from the loopback interface '
        "only). A token's name is the `by` of every command it sends and the `submitted_by` of every task; a "
        "token given as a bare scope is named token-<first 8 hex of its SHA-256>; only a token with "
        "act_for_others may name another `by`")
    api_read_needs_token: bool = Field(default=False, description="reads need a read or write token too")
    api_task_rate: float = Field(default=100.0, gt=0, description="POST /tasks per second per client (burst 2x)")
    api_heavy_requests: int = Field(default=2, ge=1, le=64, description=(
        "battery sizings and forecasts computed at once; up to four times as many wait their turn, more get 429"))
    web_request_timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="longest a request may take")
    web_idle_timeout_seconds: float = Field(
        default=15.0, gt=0, le=3600, description="a connection without a whole request this long after it "
        "opened or after its last answer is closed (slow or silent clients, request headers included)")
    duckdb_path: Path = Path("cnsched.duckdb")
    replay_duckdb_path: Path = Field(default=Path("cnsched-replay.duckdb"), description=(
        "where cnsched simulate keeps its results (sim_runs, sim_changes, sim_jobs, sim_headline) and cnsched "
        "report benefit reads the latest replay: never the live audit database"))
    sink_reject_bytes: int = Field(
        default=8192, ge=0, le=16 * 2**20, description="of a message the sink will not store, the first this "
        "many bytes are kept in sink_rejects (with its size; the whole message stays in Kafka at its offset)")
    sink_rejects_max_rows: int = Field(default=50_000, ge=1, description="sink_rejects keeps the newest this many")
    sink_rejects_max_age_days: float = Field(default=7.0, gt=0, description="sink_rejects keeps this many days")
    retention_raw_days: float = Field(default=7.0, gt=0, description=(
        "probe windows are kept raw this many days, then as per-minute roll-ups (sinks/retention.py); compute "
        "reports older than this thin to the last of each node's hour"))
    retention_minute_days: float = Field(default=90.0, gt=0, description="per-minute roll-ups this many days, then per hour")
    retention_hour_days: float = Field(default=730.0, gt=0, description="per-hour roll-ups (and reports) this many days")
    retention_every_seconds: float = Field(default=3600.0, ge=0, description=(
        "the sink applies the retention this often (first at its first batch; 0: never)"))
    data_dir: Path = Field(default=Path(".cnsched-data"), description="worker scratch data")
    log_level: LogLevel = "INFO"
    node_timeout_seconds: float = Field(default=60.0, gt=0, description="silent longer: unavailable")
    failure_min_probes: int = Field(default=3, ge=1, description=(
        "a path's latest window needs this many probes before its loss can count towards a node's network failure"))
    failure_grace_seconds: float = Field(default=30.0, ge=0, description=(
        "a node that joined, or a path whose first window ended, less than this ago is no evidence of a network failure"))
    failure_min_observers: int = Field(default=2, ge=1, description=(
        "a node fails on its paths only when this many distinct probing sources see them lost"))
    failure_max_network_fraction: float = Field(default=0.5, gt=0, le=1, description=(
        "more of the nodes than this failing on their paths at once: none is declared failed, an incident of cause "
        "observers is opened on each instead and no work moves (the probes are suspect)"))
    path_fresh_seconds: float = Field(
        default=60.0, ge=0, description="a path's latest window is fully trusted this long after it ended")
    path_stale_seconds: float = Field(
        default=300.0, gt=0, description="after this long without a new window a path is unknown (scored as "
        "neither good nor bad); in between its quality is drawn towards unknown")
    page_limit_max: int = Field(default=1000, ge=1, le=100_000)
    metrics_nodes_max: int = Field(default=2000, ge=0, le=100_000,
                                   description="per-node series on /metrics at most (the rest counted as dropped)")
    metrics_paths_max: int = Field(default=500, ge=0, le=100_000, description=(
        "per-path series on /metrics at most: paths of nodes holding tasks first, then the worst"))
    model_conversion: dict[str, dict[str, float]] | None = Field(
        default=None, description="JSON: accelerator model -> precision -> factor to dense units"
    )
    benchmark_work: dict[str, float] | None = Field(
        default=None, description="JSON: benchmark name -> FLOP per unit of its throughput"
    )
    resource_margin: float = Field(default=0.15, ge=0, lt=1, description=(
        "headroom on memory a node reports in use beyond the scheduler's books: this share of its capacity once "
        "the report is CNSCHED_NODE_TIMEOUT_SECONDS old, less for fresher ones; never off cards or the books"))
    start_timeout_seconds: float = Field(default=300.0, ge=0, description="a placed or moved task not reported started by then goes to the next candidate; 0: never")
    drain_deadline_seconds: float = Field(default=3600.0, ge=0, le=10 * 366 * 86_400, description=(
        "a draining node's work waits this long for its next checkpoint, then moves anyway (nowhere to go: "
        "re-queued from its checkpoint)"))
    max_fallbacks: int = Field(default=3, ge=0, description="nodes tried after the first refuses or fails to start a task")
    max_restarts: int = Field(default=3, ge=0, description="a failed task is re-queued from its checkpoint this often")
    max_queued_tasks: int = Field(default=100_000, ge=1, description=(
        "a new task beyond this many waiting is refused (sched.deadletter reason queue_full; POST /tasks: 503)"))
    max_wait_seconds: float = Field(default=600.0, gt=0, description=(
        "anti-starvation: a task that waited this long (and, under queue_order response, as long as its predicted "
        "run) goes first whatever its priority"))
    queue_order: Literal["response", "fifo"] = Field(default="response", description=(
        "response: within a priority, the queued task of highest (wait + predicted run) / predicted run first "
        "(short tasks before long ones that waited as long; every task's ratio grows while it waits); fifo: "
        "longest wait first, as Slurm's age factor"))
    run_predictions: Literal["history", "figures"] = Field(default="history", description=(
        "history: a task is planned with its own expected duration times the share of their figures its "
        "submitter's last two runs took (never more than its figure); figures: with the figure each user gives "
        "(where users' figures are close to their runs, as in the replay's limits, planning with them may do better)"))
    placement_rule: Literal["seconds", "points"] = Field(default="seconds", description=(
        "seconds: training tasks go where their expected completion (wait + load + run on those cards and "
        "paths) plus the queue's price on the card-seconds they hold is least, and a gang waits for a closer "
        "placement exactly when that completes sooner; other tasks by the composite. points: every task by the "
        "composite with the packing band and gang closeness below (before issue 52)"))
    packing_band: float = Field(default=20.0, ge=0, le=100, description=(
        "points rule: while other tasks wait, a one-node task goes to the fullest node that fits among those within this many "
        "score points of the best (best fit in a tier, as Slurm's node weights); 0: the best score alone"))
    gang_packing_band: float = Field(default=2.0, ge=0, le=100, description=(
        "points rule: a gang's workers go to the fullest nodes among those within this many points of the best next worker "
        "(its quality to the workers chosen so far): equal paths, measured, differ by noise; 0: the best alone"))
    gang_closeness: float = Field(default=0.8, ge=0, le=1, description=(
        "points rule: a gang waits rather than take members whose mean pair quality is below this share of what its lead's "
        "closest nodes would give; 0: it takes any"))
    gang_patience: float = Field(default=4.0, ge=0, description=(
        "... for at most this many times its expected duration, then it takes what is free"))
    staging_store: str = Field(default="store.{site}", max_length=256, description=(
        "data that follows compute: a site's store endpoint ({site}: the site's name); a task placed at a site whose "
        "store holds no copy of the data it names (data_source.name) has it copied there, and later tasks load the "
        "copy; empty: no staging"))
    staging_store_gb: float = Field(default=1_000_000.0, gt=0, description=(
        "what one store keeps of staged copies, GB; beyond it the least recently used go"))
    staging_command: str = Field(default="mkdir -p {stores}/{target} && cp -a {stores}/{source}/{name} {stores}/{target}/",
                                 max_length=4096, description=(
        "the Slurm bridge: one copy of a decision's staging, run as a Slurm job on the placement's first node before "
        "the task's job ({name}, {source}, {target}, {size_gb}, {stores} filled in, shell-quoted)"))
    staging_root: str = Field(default="", max_length=1024, description=(
        "the Slurm bridge: the directory holding a directory per store ({stores}; empty: <work dir>/stores)"))
    queue_timeout_seconds: float = Field(
        default=86_400.0, ge=0, description="a queued task not placed by then leaves the queue (an unschedulable "
        "decision says why); 0: never")
    rescore_interval_seconds: float = Field(default=0.5, gt=0, le=3600, description="at most one rescoring per")
    decision_timeout_seconds: float = Field(default=10.0, gt=0, le=300, description="POST /tasks waits this long")
    migration_cooldown_seconds: float = Field(default=600.0, ge=0, description="a moved task rests this long")
    energy_carbon_weight: float = Field(
        default=0.5, ge=0, le=1, description="share of carbon (vs cost) in the energy score")
    compute_normalisation: Literal["auto", "class", "cluster"] = Field(
        default="auto", description="compute scores against the best node of a node's class (class), of all nodes "
        "(cluster: standard units across classes), or by the task (auto: class when it accepts one class)")
    frugal_types: list[str] = Field(
        default_factory=list, description="task types scored by economy: the weakest card that fits is best, so "
        "high-end cards are kept for other work (e.g. [\"fine-tune\", \"preprocessing\"]); off by default")
    card_prices: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: {"*": 1.0}, description='JSON {"<accelerator class>": price of a card-hour, '
        '"*": any other class} for `cnsched report cost` (cost units; default 1 per card-hour)')
    site_ramp_limits: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict, description='JSON {"<site>": MW per minute, "*": any other site}: placed tasks start '
        "no sooner than keeps the power a site adds within a minute under its limit (decisions say start_at); "
        "empty: no limit")
    checkpoint_interval_seconds: float = Field(
        default=1800.0, gt=0, le=7 * 86_400, description="the checkpoint interval placed tasks' checkpoint phases "
        "(with site ramp limits) spread checkpoints over")
    energy_price_per_mwh: float = Field(
        default=100.0, ge=0, description="energy price where a node reports none (cost units per MWh)")
    transfer_price_per_gb: float = Field(
        default=0.0, ge=0, description="price of a GB loaded or moved (`cnsched report cost`); 0: volume only")
    idle_power_share: float = Field(
        default=0.5, ge=0, le=1, description="a node's draw on free cards, as a share of its full load")
    forecast_step_seconds: float = Field(default=60.0, gt=0, le=86_400, description="resolution of forecasts")
    preventive_reschedule: bool = Field(
        default=False, description="score paths at the worse of measured and forecast p95 rtt (early trigger)")
    preventive_horizon_seconds: float = Field(default=1800.0, gt=0, le=7 * 86_400)
    history_refresh_seconds: float = Field(
        default=300.0, gt=0, description="how often forecasts and learned alphas are refreshed from DuckDB")
    alpha_min_tasks: int = Field(
        default=50, ge=3, description="finished tasks of a type before its learned alpha becomes the default")
    learn_alpha: bool = Field(default=True, description="use learned alphas as type defaults (enough history)")
    quotas_file: Path | None = Field(
        default=None, description="team quotas (JSON: {\"quotas\": [...]}) applied when none are set yet")
    tidal_lead_seconds: float = Field(
        default=1800.0, gt=0, le=7 * 86_400,
        description="tidal lending: lent cards are taken back when the team's forecast peak is this close")
    preemption: bool = Field(
        default=True, description="a task that finds no room may preempt work it outranks (priority, reclaim)")
    preemption_priority: int | None = Field(
        default=None, ge=0, le=100, description="without team quotas, tasks of at least this priority may preempt "
        "lower ones (besides tasks that say preempts: true); unset: only those")
    fetch_max_wait_ms: int = Field(
        default=100, ge=1, le=10_000, description="longest a fetch waits for data at the broker"
    )
    session_timeout_seconds: float = Field(default=6.0, ge=1, le=300)
    heartbeat_interval_seconds: float = Field(default=1.5, gt=0, le=60)

    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems = []
        if self.path_fresh_seconds >= self.path_stale_seconds:
            problems.append(f"{env_name('path_fresh_seconds')} must be below {env_name('path_stale_seconds')}")
        if self.window_step_seconds > self.window_seconds:
            problems.append(
                f"{env_name('window_step_seconds')} must not exceed {env_name('window_seconds')}"
            )
        if not self.retention_raw_days <= self.retention_minute_days <= self.retention_hour_days:
            problems.append(f"{env_name('retention_raw_days')} <= {env_name('retention_minute_days')} <= "
                            f"{env_name('retention_hour_days')} must hold")
        if not divides_day(self.forecast_step_seconds):
            problems.append(f"{env_name('forecast_step_seconds')} must divide a day (e.g. 60, 300, 3600)")
        if self.web_request_timeout_seconds <= self.decision_timeout_seconds:
            problems.append(f"{env_name('web_request_timeout_seconds')} must exceed "
                            f"{env_name('decision_timeout_seconds')}")
        unknown = [t for t in self.frugal_types if t not in TASK_TYPES]
        if unknown:
            problems.append(f"{env_name('frugal_types')}: {unknown[0]!r} is not a task type "
                            f"({', '.join(TASK_TYPES)})")
        if any(len(t) < 16 for t in self.api_tokens or {}):
            problems.append(f"{env_name('api_tokens')}: every token must be at least 16 characters")
        if self.heartbeat_interval_seconds * 3 > self.session_timeout_seconds:
            problems.append(
                f"{env_name('heartbeat_interval_seconds')} must be at most a third of "
                f"{env_name('session_timeout_seconds')}"
            )
        if self.security_protocol.startswith("SASL"):
            for name in ("sasl_mechanism", "sasl_username", "sasl_password"):
                if getattr(self, name) is None:
                    problems.append(
                        f"{env_name(name)} is required with "
                        f"{env_name('security_protocol')}={self.security_protocol}"
                    )
        if self.kafka_bootstrap is not None:
            for hp in self.kafka_bootstrap.split(","):
                host, _, port = hp.strip().rpartition(":")
                if not host or not port.isdigit():
                    problems.append(f"KAFKA_BOOTSTRAP entry {hp!r} is not host:port")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # ------------------------------------------------------------------ derived
    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    @property
    def bootstrap_servers(self) -> list[str]:
        if not self.kafka_bootstrap:
            raise ConfigError("no Kafka bootstrap servers: set KAFKA_BOOTSTRAP or start the embedded broker")
        return [hp.strip() for hp in self.kafka_bootstrap.split(",") if hp.strip()]

    @property
    def conversion_table(self) -> dict[str, dict[str, float]]:
        """CNSCHED_MODEL_CONVERSION, or the built-in table."""
        return self.model_conversion or DEFAULT_MODEL_CONVERSION

    @property
    def benchmark_table(self) -> dict[str, float]:
        """CNSCHED_BENCHMARK_WORK, or the built-in table."""
        return self.benchmark_work or DEFAULT_BENCHMARK_WORK

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.security_protocol.endswith("SSL"):
            return None
        ctx = ssl.create_default_context(cafile=str(self.ssl_cafile) if self.ssl_cafile else None)
        if self.ssl_certfile:
            ctx.load_cert_chain(str(self.ssl_certfile), str(self.ssl_keyfile) if self.ssl_keyfile else None)
        return ctx

    def kafka_client_kwargs(self) -> dict[str, Any]:
        """Connection settings for any aiokafka client (producer, consumer, admin)."""
        kw: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
        }
        ctx = self.ssl_context()
        if ctx is not None:
            kw["ssl_context"] = ctx
        if self.security_protocol.startswith("SASL"):
            kw["sasl_mechanism"] = self.sasl_mechanism
            kw["sasl_plain_username"] = self.sasl_username
            kw["sasl_plain_password"] = self.sasl_password.get_secret_value() if self.sasl_password else None
        return kw

    def with_bootstrap(self, bootstrap: str) -> Settings:
        return self.model_copy(update={"kafka_bootstrap": bootstrap})


def env_name(field: str) -> str:
    if field == "kafka_bootstrap":
        return "KAFKA_BOOTSTRAP"
    return f"CNSCHED_{field.upper()}"


def load_settings(**overrides: Any) -> Settings:
    """Read the environment (and explicit overrides); raise ConfigError listing every problem."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = [str(x) for x in err["loc"] if x != "__root__"]
            where = env_name(loc[0]) if loc else "configuration"
            msg = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            shown = "" if loc == [] or isinstance(got, dict) else f" (got {got!r})"
            parts.append(f"{where}: {msg}{shown}" if loc else msg)
        raise ConfigError("invalid configuration: " + "; ".join(parts)) from None
