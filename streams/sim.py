"""Simulated probes for the demo: a small multi-region cluster with realistic latencies.

Regions eu, us and asia, a few nodes each. Intra-region RTT 0.1-0.3 ms; inter-region around
90 ms (eu-us), 200 ms (us-asia), 270 ms (eu-asia). Lognormal jitter, a few spikes, rare losses.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np

from streams.producer import ProbeProducer

INTER_REGION_RTT_MS = {
    frozenset({"eu", "us"}): 90.0,
    frozenset({"us", "asia"}): 200.0,
    frozenset({"eu", "asia"}): 270.0,
}


@dataclass
class Topology:
    nodes: list[str]
    region: dict[str, str]
    base_rtt_ms: np.ndarray  # [src, dst]

    @classmethod
    def small(cls, nodes_per_region: int = 3, seed: int = 7) -> Topology:
        rng = np.random.default_rng(seed)
        nodes, region = [], {}
        for r in ("eu", "us", "asia"):
            for i in range(nodes_per_region):
                name = f"{r}-n{i + 1:02d}"
                nodes.append(name)
                region[name] = r
        n = len(nodes)
        base = np.zeros((n, n))
        for i, a in enumerate(nodes):
            for j, b in enumerate(nodes):
                if i == j:
                    continue
                if region[a] == region[b]:
                    base[i, j] = rng.uniform(0.1, 0.3)
                else:
                    base[i, j] = INTER_REGION_RTT_MS[frozenset({region[a], region[b]})] * rng.uniform(0.97, 1.03)
        base = (base + base.T) / 2
        return cls(nodes, region, base)


class ProbeSimulator:
    """Emits rtt_ms for every ordered node pair at ``rate_hz`` and bw_util per node each second."""

    def __init__(self, topo: Topology, rate_hz: float = 100.0, seed: int = 11,
                 spike_rate: float = 0.02, loss_rate: float = 0.002) -> None:
        self.topo = topo
        self.rate_hz = rate_hz
        self.rng = np.random.default_rng(seed)
        self.spike_rate = spike_rate
        self.loss_rate = loss_rate

    def tick(self, producer: ProbeProducer, t0: float, t1: float) -> int:
        """Generate the samples of (t0, t1] for every source node; return how many."""
        n = len(self.topo.nodes)
        per_pair = int(round((t1 - t0) * self.rate_hz))
        if per_pair <= 0:
            return 0
        total = 0
        for i, src in enumerate(self.topo.nodes):
            dst_idx = np.array([j for j in range(n) if j != i])
            ts = np.tile(np.sort(self.rng.uniform(t0, t1, per_pair)), dst_idx.size)
            dsts = np.repeat(np.array(self.topo.nodes, dtype=object)[dst_idx], per_pair)
            base = np.repeat(self.topo.base_rtt_ms[i, dst_idx], per_pair)
            rtt = base * self.rng.lognormal(0.0, 0.08, base.size)
            spikes = self.rng.random(base.size) < self.spike_rate
            rtt[spikes] *= self.rng.uniform(10, 100, int(spikes.sum()))
            rtt[self.rng.random(base.size) < self.loss_rate] = np.nan
            producer.add_many(ts, src, dsts, "rtt_ms", rtt)
            total += ts.size
            if int(t1) != int(t0):  # once per second: NIC utilisation
                producer.add(float(int(t1)), src, "", "bw_util", float(self.rng.beta(2, 5)))
                total += 1
        return total

    async def run(self, producer: ProbeProducer, seconds: float, period_s: float = 0.1) -> int:
        sent = 0
        t_prev = time.time()
        deadline = t_prev + seconds
        while True:
            await asyncio.sleep(period_s)
            now = time.time()
            sent += self.tick(producer, t_prev, min(now, deadline))
            t_prev = now
            if now >= deadline:
                return sent
