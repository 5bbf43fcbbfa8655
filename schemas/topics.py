"""Topic names: the contract that producers, consumers and tools rely on (DESIGN.md)."""

PROBE_SAMPLES = "probe.samples"
PROBE_DEADLETTER = "probe.deadletter"
NETSTATE_WINDOWS = "netstate.windows"
COMPUTE_NODES = "compute.nodes"
SCHED_TASKS = "sched.tasks"
SCHED_DECISIONS = "sched.decisions"
SCHED_RESCHEDULES = "sched.reschedules"

ALL_TOPICS: tuple[str, ...] = (
    PROBE_SAMPLES,
    PROBE_DEADLETTER,
    NETSTATE_WINDOWS,
    COMPUTE_NODES,
    SCHED_TASKS,
    SCHED_DECISIONS,
    SCHED_RESCHEDULES,
)

