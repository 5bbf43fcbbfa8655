"""The words the whole system shares, defined once: task types and their defaults, compute kinds,
network profiles, parallelism strategies, reschedule triggers, and the robust-scale constant.

schemas/ spells the same words as pydantic literals (it imports nothing of ours); a test holds the
two spellings equal (tests/test_vocabulary.py).

alpha weighs compute against network in ``alpha x compute + (1 - alpha) x network``: data-parallel
training exchanges gradients every step (small alpha: the network matters most); a single-card
inference service is bound by its card (large alpha).
"""

from __future__ import annotations

from dataclasses import dataclass

# compute kinds of core/metering.py (columns of the compute-score matrix, in this order)
TASK_KINDS: tuple[str, ...] = ("training", "inference", "generic")
# network profiles of core/quality.py (weights of the path-quality dimensions)
NETWORK_PROFILES: tuple[str, ...] = ("balanced", "latency", "bandwidth", "duplex")
STRATEGIES: tuple[str, ...] = ("data-parallel", "model-parallel", "pipeline", "single")
DEGRADATION, IMPROVEMENT, NODE_JOINED, FORECAST = "degradation", "improvement", "node_joined", "forecast"
NODE_FAILED, ROLLBACK, DRAIN, PATH_FAILED = "node_failed", "rollback", "drain", "path_failed"
RESCHEDULE_TRIGGERS: tuple[str, ...] = (DEGRADATION, IMPROVEMENT, NODE_JOINED, FORECAST, NODE_FAILED, ROLLBACK, DRAIN,
                                        PATH_FAILED)

MAD_TO_SIGMA = 1.4826  # median absolute deviation x this = standard deviation of a normal distribution
PLAIN_NODE_PENALTY = 20.0  # points a task that prefers plain nodes loses on an accelerator node


@dataclass(frozen=True)
class TypeDefaults:
    alpha: float
    profile: str  # one of NETWORK_PROFILES
    kind: str  # one of TASK_KINDS
    prefers_plain_nodes: bool = False  # when it needs no accelerator
    frugal: bool = False  # scored by economy (core.metering.economy_scores): CNSCHED_FRUGAL_TYPES, off by default
    learned: bool = False  # alpha learned from finished tasks (core/alpha.py): evidence, not a rule, so it stands


DEFAULT_TYPES: dict[str, TypeDefaults] = {
    "training-data-parallel": TypeDefaults(0.2, "bandwidth", "training"),
    "training-model-parallel": TypeDefaults(0.3, "duplex", "training"),  # both ways, latency and bandwidth
    "fine-tune": TypeDefaults(0.5, "balanced", "training"),
    "inference": TypeDefaults(0.8, "latency", "inference"),
    "data-intensive": TypeDefaults(0.3, "bandwidth", "generic"),
    "preprocessing": TypeDefaults(0.6, "bandwidth", "generic", prefers_plain_nodes=True),
    "batch-analytics": TypeDefaults(0.6, "balanced", "generic", prefers_plain_nodes=True),
}
TASK_TYPES: tuple[str, ...] = tuple(DEFAULT_TYPES)
TYPE_ALPHAS: dict[str, float] = {t: d.alpha for t, d in DEFAULT_TYPES.items()}  # built in, before learning

# a data-parallel strategy declared on another type makes it as sensitive as data-parallel training
STRATEGY_ALPHA: dict[str, float | None] = {"data-parallel": 0.2, "model-parallel": 0.3, "pipeline": 0.3,
                                           "single": None}
