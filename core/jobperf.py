"""How long a job takes where it is placed: the performance model of `cnsched simulate` (issue 13).

A trace records each job's duration on the cluster it ran on; we take it as the job's time on an
ideal placement (all its nodes in one rack, data at hand). Elsewhere:

- a multi-node data-parallel job spends a share ``c`` of its ideal time communicating (drawn per job,
  seeded, uniform in [``comm_share_low``, ``comm_share_high``]); each iteration's ring all-reduce of a
  gradient of ``grad_gb`` GB over n members takes
  ``2 (n - 1) x RTT_worst + 2 (n - 1) / n x grad_gb x 8 / B_narrowest`` seconds (RTT of the worst
  member pair in seconds, B the narrowest member path in Gbit/s); the communication share scales with
  that time against the same at the ideal placement: ``T = T_ideal x ((1 - c) + c x A / A_ideal)``;
- a job whose data lives at a home site pays the extra time to load it over the path from there:
  ``data_gb x 8 / B_load - data_gb x 8 / B_ideal``;
- the computing share runs ``speed`` times faster on faster cards (the slowest member's speed against
  the trace's reference card, 1 by default): ``T = T_ideal x ((1 - c) / speed + c x A / A_ideal) + load``.
Arrays in, arrays out, vectorised over jobs; :func:`job_time_reference` is the plain per-job version.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PerfModel:
    grad_gb: float = 1.0  # gradient exchanged per iteration
    comm_share_low: float = 0.1
    comm_share_high: float = 0.5
    ideal_rtt_ms: float = 0.05  # one rack
    ideal_gbps: float = 100.0  # one rack's links

    def __post_init__(self) -> None:
        if not 0 <= self.comm_share_low <= self.comm_share_high < 1:
            raise ValueError("communication shares must satisfy 0 <= low <= high < 1")
        if self.grad_gb < 0 or self.ideal_rtt_ms <= 0 or self.ideal_gbps <= 0:
            raise ValueError("grad_gb >= 0, ideal_rtt_ms > 0 and ideal_gbps > 0")


def comm_shares(n_jobs: int, model: PerfModel, seed: int) -> np.ndarray:
    """Each job's communication share at its ideal placement, drawn reproducibly from ``seed``."""
    return np.random.default_rng(seed).uniform(model.comm_share_low, model.comm_share_high, n_jobs)


def allreduce_s(n_nodes, worst_rtt_ms, narrowest_gbps, grad_gb: float) -> np.ndarray:
    """Ring all-reduce time per iteration (0 for a single node)."""
    n = np.asarray(n_nodes, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = 2 * (n - 1) * np.asarray(worst_rtt_ms, np.float64) / 1000.0 \
            + 2 * (n - 1) / n * grad_gb * 8.0 / np.asarray(narrowest_gbps, np.float64)
    return np.where(n > 1, t, 0.0)


def job_time(ideal_s, comm_share, n_nodes, worst_rtt_ms, narrowest_gbps, data_gb, load_gbps,
             model: PerfModel, speed=1.0) -> np.ndarray:
    """float64[J]: each job's time at its placement (see the module's rules)."""
    ideal = np.asarray(ideal_s, np.float64)
    n = np.asarray(n_nodes, np.float64)
    a = allreduce_s(n, worst_rtt_ms, narrowest_gbps, model.grad_gb)
    a_ideal = allreduce_s(n, np.full(n.shape, model.ideal_rtt_ms), np.full(n.shape, model.ideal_gbps), model.grad_gb)
    c = np.where(n > 1, np.asarray(comm_share, np.float64), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(a_ideal > 0, a / a_ideal, 1.0)
        bits = np.asarray(data_gb, np.float64) * 8.0
        load = np.where(bits > 0, bits / np.asarray(load_gbps, np.float64) - bits / model.ideal_gbps, 0.0)
    return ideal * ((1 - c) / np.asarray(speed, np.float64) + c * scale) + np.maximum(load, 0.0)


def job_time_reference(ideal_s, comm_share, n_nodes, worst_rtt_ms, narrowest_gbps, data_gb, load_gbps,
                       model: PerfModel, speed=None) -> np.ndarray:
    """Plain per-job version of :func:`job_time`."""
    out = []
    speed = [1.0] * len(ideal_s) if speed is None else speed
    for T, c, n, rtt, bw, gb, lbw, v in zip(ideal_s, comm_share, n_nodes, worst_rtt_ms, narrowest_gbps, data_gb,
                                            load_gbps, speed, strict=True):
        t = float(T) / v
        if n > 1:
            a = 2 * (n - 1) * rtt / 1000 + 2 * (n - 1) / n * model.grad_gb * 8 / bw
            a0 = 2 * (n - 1) * model.ideal_rtt_ms / 1000 + 2 * (n - 1) / n * model.grad_gb * 8 / model.ideal_gbps
            t = T * ((1 - c) / v + c * a / a0)
        if gb > 0:
            t += max(gb * 8 / lbw - gb * 8 / model.ideal_gbps, 0.0)
        out.append(t)
    return np.array(out, np.float64)
