"""The demo's simulated probes send throughput tests too (issue 53: the scheduler bounds what it plans
with by what a path measured): every 10 s one bw_gbps sample per peer, no more than one 64 MiB window
per round trip allows."""

from __future__ import annotations

import numpy as np

from core.quality import window_gbps
from streams.dev.sim import ProbeSimulator, Topology


class Collect:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, ts, src, dst, metric, value) -> None:
        self.rows.append((ts, src, dst, metric, value))

    def add_many(self, ts, src, dst, metric, value) -> None:
        ts = np.atleast_1d(ts)
        dst = np.broadcast_to(np.asarray(dst, dtype=object), ts.shape)
        value = np.broadcast_to(np.asarray(value, dtype=float), ts.shape)
        self.rows += [(t, src, d, metric, v) for t, d, v in zip(ts, dst, value, strict=True)]


def test_throughput_samples_every_ten_seconds_bounded_by_the_window():
    topo = Topology.build(nodes_per_region=2)
    sim = ProbeSimulator(topo, rate_hz=1.0, loss_burst_per_path_per_hour=0.0, reroute_per_path_per_hour=0.0)
    out = Collect()
    t = 1_000_000.0
    for k in range(20):  # 20 s in 1-second steps: two throughput rounds (at 1,000,010 and 1,000,020)
        sim.tick(out, t + k, t + k + 1)
    bw = [r for r in out.rows if r[3] == "bw_gbps"]
    n = len(topo.nodes)
    assert len(bw) == 2 * n * (n - 1) and {r[0] for r in bw} == {t + 10, t + 20}
    idx = {x: i for i, x in enumerate(topo.nodes)}
    for _, src, dst, _, v in bw:
        bound = min(100.0, float(window_gbps(topo.base_rtt_ms[idx[src], idx[dst]])))
        assert 0 < v <= bound * 1.25  # a few per cent of noise around at most the bound
    far = [v for _, s, d, _, v in bw if topo.region[s] != topo.region[d]]
    near = [v for _, s, d, _, v in bw if topo.region[s] == topo.region[d]]
    assert max(far) < 10 < min(near)  # 90-270 ms apart: a few Gbit/s; in a region: tens
