"""Topic names: the contract that producers, consumers and tools rely on (DESIGN.md)."""

PROBE_SAMPLES = "probe.samples"
PROBE_DEADLETTER = "probe.deadletter"
NETSTATE_WINDOWS = "netstate.windows"
COMPUTE_NODES = "compute.nodes"
SCHED_TASKS = "sched.tasks"
SCHED_DECISIONS = "sched.decisions"
SCHED_RESCHEDULES = "sched.reschedules"
COMPUTE_DEADLETTER = "compute.deadletter"
SCHED_DEADLETTER = "sched.deadletter"
SCHED_EVENTS = "sched.events"
SCHED_INCIDENTS = "sched.incidents"
SCHED_QUOTAS = "sched.quotas"
SCHED_MAINTENANCE = "sched.maintenance"
SCHED_ROUTES = "sched.routes"

ALL_TOPICS: tuple[str, ...] = (
    PROBE_SAMPLES,
    PROBE_DEADLETTER,
    NETSTATE_WINDOWS,
    COMPUTE_NODES,
    SCHED_TASKS,
    SCHED_DECISIONS,
    SCHED_RESCHEDULES,
    COMPUTE_DEADLETTER,
    SCHED_DEADLETTER,
    SCHED_EVENTS,
    SCHED_INCIDENTS,
    SCHED_QUOTAS,
    SCHED_MAINTENANCE,
    SCHED_ROUTES,
)


# The state agent needs one consistent view of the network, the compute inventory and the tasks
# (their lifecycle events release what they hold): these compact, low-rate topics have a single
# partition, owned by one worker at a time.
STATE_TOPICS: frozenset[str] = frozenset({NETSTATE_WINDOWS, COMPUTE_NODES, SCHED_TASKS, SCHED_EVENTS, SCHED_QUOTAS,
                                          SCHED_MAINTENANCE})
