"""The Faust app: built from Settings at start, never at import time."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import faust
from faust.types import TopicT

from schemas import topics as T
from streams.config import Settings
from streams.metrics import Counters


@dataclass
class Topics:
    """Every topic the worker reads or writes; keys and values are raw bytes, decoded by us."""

    samples: TopicT
    deadletter: TopicT
    windows: TopicT
    compute_nodes: TopicT
    tasks: TopicT
    decisions: TopicT
    reschedules: TopicT
    compute_deadletter: TopicT
    sched_deadletter: TopicT
    events: TopicT
    incidents: TopicT
    quotas: TopicT
    maintenance: TopicT
    routes: TopicT


def faust_credentials(settings: Settings):
    if settings.security_protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.sasl_username,
            password=settings.sasl_password.get_secret_value() if settings.sasl_password else None,
            ssl_context=settings.ssl_context(),
            mechanism=settings.sasl_mechanism,
        )
    if settings.security_protocol == "SSL":
        return faust.SSLCredentials(settings.ssl_context())
    return None


def faust_app(settings: Settings, app_id: str, **overrides) -> faust.App:
    """A Faust app configured from Settings (brokers, security, timeouts, web)."""
    from streams.runtime.faust_patches import (
        AFTER_BROKER_LOSS_ENV,
        no_topic_auto_creation,
        use_fetch_max_wait,
        use_true_highwaters,
    )

    no_topic_auto_creation()
    use_fetch_max_wait(settings.fetch_max_wait_ms)
    use_true_highwaters(settings.kafka_client_kwargs(), unreadable_is_empty=bool(os.environ.get(AFTER_BROKER_LOSS_ENV)))
    conf = dict(
        broker=[f"kafka://{hp}" for hp in settings.bootstrap_servers],
        broker_credentials=faust_credentials(settings),
        store="memory://",
        autodiscover=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=settings.kafka_create_topics,
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.heartbeat_interval_seconds,
        consumer_auto_offset_reset="earliest",
        web_host=advertised_host(settings),
        web_bind=settings.web_bind or settings.web_host,
        web_port=settings.web_port,
        datadir=str(settings.data_dir / app_id),
        # no standby replicas: Faust's memory store drops every key of a non-active partition when a
        # recovery completes, standby keys included, while its recovery offsets say they were read; a
        # standby partition that became active later was missing those keys (window state lost after a
        # restart with a rebalance). Active partitions recover from their changelog instead.
        table_standby_replicas=0,
        producer_linger_ms=5,
        producer_max_request_size=8 << 20,
    )
    conf.update(overrides)
    return faust.App(app_id, **conf)


def advertised_host(settings: Settings) -> str:
    """The name other workers reach this one's API by: CNSCHED_WEB_HOST, or this machine's hostname when
    that is a wildcard (0.0.0.0 / ::: listen everywhere, as in docker-compose.yml)."""
    import socket

    return socket.gethostname() if settings.web_host in ("0.0.0.0", "::") else settings.web_host


def guarded_web(settings: Settings, counters: Counters) -> dict:
    """Faust's web_application_options: the request guard (streams/web/guard.py) and the body limit."""
    from streams.web.guard import MAX_BODY_BYTES, guard_middleware

    return {"middlewares": [guard_middleware(settings, counters)], "client_max_size": MAX_BODY_BYTES}


def declare_topics(app: faust.App, settings: Settings) -> Topics:
    """The worker's topics: raw bytes both ways; the state topics have one partition."""

    def topic(name: str) -> TopicT:
        return app.topic(
            settings.topic(name),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=1 if name in T.STATE_TOPICS else settings.partitions,
        )

    topics = Topics(
        samples=topic(T.PROBE_SAMPLES),
        deadletter=topic(T.PROBE_DEADLETTER),
        windows=topic(T.NETSTATE_WINDOWS),
        compute_nodes=topic(T.COMPUTE_NODES),
        tasks=topic(T.SCHED_TASKS),
        decisions=topic(T.SCHED_DECISIONS),
        reschedules=topic(T.SCHED_RESCHEDULES),
        compute_deadletter=topic(T.COMPUTE_DEADLETTER),
        sched_deadletter=topic(T.SCHED_DEADLETTER),
        events=topic(T.SCHED_EVENTS),
        incidents=topic(T.SCHED_INCIDENTS),
        quotas=topic(T.SCHED_QUOTAS),
        maintenance=topic(T.SCHED_MAINTENANCE),
        routes=topic(T.SCHED_ROUTES),
    )
    return topics


def watch_broker(app: faust.App, settings: Settings, sample_partitions: int, readiness,
                 on_lost: Callable[[str], None] | None) -> None:
    """Check every few seconds that the broker still has our topics (streams/worker/broker_watch.py)."""
    from streams.kafka import table_changelogs
    from streams.worker.broker_watch import CHECK_INTERVAL_S, BrokerWatch

    def lost(reason: str) -> None:
        readiness.broker_lost = reason
        if on_lost is not None:
            on_lost(reason)

    names = [settings.topic(n) for n in T.ALL_TOPICS] + list(table_changelogs(settings, sample_partitions))
    watch = BrokerWatch(settings.kafka_client_kwargs(), names, lost)

    @app.timer(interval=CHECK_INTERVAL_S)
    async def broker_watch() -> None:
        await watch.check()

    @app.on_before_shutdown.connect
    async def stop_watch(app, **kw) -> None:
        await watch.stop()


def create_app(
    settings: Settings, sample_partitions: int | None = None, on_broker_lost: Callable[[str], None] | None = None
) -> tuple[faust.App, Topics, Counters]:
    """The worker's app. ``on_broker_lost(reason)`` runs once the broker is seen to have lost our topics
    (``cnsched worker`` restarts itself; without it the worker only says not ready)."""
    counters = Counters()
    app = faust_app(
        settings,
        settings.app_id,
        web_application_options=guarded_web(settings, counters),
        # the ingest agent acks events itself, after the flush that persisted them; Faust must not
        # wait for those acks on shutdown or rebalance (a revoke flushes, see streams/ingest.py)
        stream_wait_empty=False,
    )

    topics = declare_topics(app, settings)

    from streams.runtime.faust_patches import cancel_on_disconnect, use_idle_timeout
    from streams.web import routes as web
    from streams.worker import ingest, state_tables
    from streams.worker.health import Readiness
    from streams.worker.scheduling import quota_agent
    from streams.worker.scheduling import wiring as sched_agent
    from streams.worker.warm import KernelWarmer

    ingest.register(app, topics, settings, counters, sample_partitions or settings.partitions)
    net, inv = state_tables.register(app, topics, settings, counters)
    service = sched_agent.register(app, topics, settings, counters, net, inv)
    view = service.view  # what the API may read of the scheduler
    quotas = quota_agent.register(app, topics, settings, counters, service.sched, view)
    tasks = service.book
    readiness = Readiness(app)
    readiness.warmer = KernelWarmer().start()
    for agent in app.agents.values():
        agent._on_error = readiness.agent_crashed  # what app.agent(on_error=...) sets; Faust restarts the agent after it
    web.register(app, counters, settings, net, inv, tasks, topics.tasks, readiness, quotas, topics.quotas, view,
                 topics.events, topics.maintenance)
    use_idle_timeout(app, settings.web_idle_timeout_seconds)
    cancel_on_disconnect(app)
    watch_broker(app, settings, sample_partitions or settings.partitions, readiness, on_broker_lost)
    return app, topics, counters
