"""Simulated probes and compute reports for the demo: a multi-level cluster whose network moves.

Topology: regions eu, us, asia; data centres per region; racks per data centre; nodes per rack.
Base RTT: same rack 0.1 ms, same data centre 0.15-0.2 ms, same region 0.2-0.3 ms; between regions
about 90 ms (eu-us), 200 ms (us-asia), 270 ms (eu-asia). On top:
- diurnal congestion: each region's load follows its local time of day (a compressed "day" of
  ``day_s`` seconds in the demo); it raises NIC utilisation, queueing delay and retransmissions;
- reroutes: now and then an inter-region path steps up 30-60 % in latency for a while;
- loss bursts: now and then a path loses 2-10 % of its probes for a few seconds;
- lognormal jitter and 2 % spikes everywhere.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

import numpy as np

from core.quality import window_gbps

REGIONS = ("eu", "us", "asia")
REGION_UTC_OFFSET_H = {"eu": 1, "us": -5, "asia": 8}
INTER_REGION_RTT_MS = {
    frozenset({"eu", "us"}): 90.0,
    frozenset({"us", "asia"}): 200.0,
    frozenset({"eu", "asia"}): 270.0,
}
ACCELERATORS = {  # per region: model, class, cards, per-card peaks (vendor-stated), memory
    "eu": ("H100-SXM", "h100", 8, {"fp32": 67, "fp16": 1979, "int8": 3958}, 80, 3350),
    "us": ("A100-SXM", "a100", 8, {"fp32": 19.5, "fp16": 312, "int8": 624}, 80, 2039),
    "asia": ("L40S", "l40s", 4, {"fp32": 91.6, "fp16": 733, "int8": 1466}, 48, 864),
}


ENERGY = {  # per region: energy price ($/MWh) and carbon intensity (gCO2/kWh)
    "eu": {"energy_price_per_mwh": 95.0, "carbon_g_per_kwh": 250.0},
    "us": {"energy_price_per_mwh": 60.0, "carbon_g_per_kwh": 380.0},
    "asia": {"energy_price_per_mwh": 70.0, "carbon_g_per_kwh": 520.0},
}


@dataclass
class Topology:
    nodes: list[str]
    region: dict[str, str]
    dc: dict[str, str]
    rack: dict[str, str]
    base_rtt_ms: np.ndarray  # [src, dst]

    @classmethod
    def build(cls, nodes_per_region: int = 3, dcs_per_region: int = 2, racks_per_dc: int = 2,
              seed: int = 7) -> Topology:
        rng = np.random.default_rng(seed)
        nodes, region, dc, rack = [], {}, {}, {}
        for r in REGIONS:
            for i in range(nodes_per_region):
                name = f"{r}-n{i + 1:02d}"
                d = i % dcs_per_region
                k = (i // dcs_per_region) % racks_per_dc
                nodes.append(name)
                region[name], dc[name], rack[name] = r, f"{r}-dc{d + 1}", f"{r}-dc{d + 1}-r{k + 1}"
        n = len(nodes)
        base = np.zeros((n, n))
        for i, a in enumerate(nodes):
            for j, b in enumerate(nodes[:i]):
                if rack[a] == rack[b]:
                    v = 0.1
                elif dc[a] == dc[b]:
                    v = rng.uniform(0.15, 0.2)
                elif region[a] == region[b]:
                    v = rng.uniform(0.2, 0.3)
                else:
                    v = INTER_REGION_RTT_MS[frozenset({region[a], region[b]})] * rng.uniform(0.97, 1.03)
                base[i, j] = base[j, i] = v
        return cls(nodes, region, dc, rack, base)


@dataclass
class Episode:
    kind: str  # "reroute" or "loss"
    src: int
    dst: int
    start: float
    end: float
    size: float  # latency factor, or loss probability


@dataclass
class ProbeSimulator:
    topo: Topology
    rate_hz: float = 100.0
    seed: int = 11
    day_s: float = 86_400.0
    spike_rate: float = 0.02
    reroute_per_path_per_hour: float = 0.5
    loss_burst_per_path_per_hour: float = 2.0
    episodes: list[Episode] = field(default_factory=list)
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    # the world -------------------------------------------------------------------------------
    def congestion(self, region: str, t: float) -> float:
        """0..1: the region's load at epoch ``t``, peaking mid-afternoon local time."""
        hour = ((t % self.day_s) / self.day_s * 24 + REGION_UTC_OFFSET_H[region]) % 24
        return 0.5 + 0.5 * math.cos((hour - 15) / 24 * 2 * math.pi)

    def inject(self, kind: str, src: str, dst: str, start: float, seconds: float, size: float) -> Episode:
        """Schedule a reroute (latency factor) or a loss burst (probability) on a path, both ways."""
        i, j = self.topo.nodes.index(src), self.topo.nodes.index(dst)
        ep = Episode(kind, i, j, start, start + seconds, size)
        self.episodes.append(ep)
        self.episodes.append(Episode(kind, j, i, start, start + seconds, size))
        return ep

    def _random_episodes(self, t0: float, t1: float) -> None:
        n = len(self.topo.nodes)
        dt_h = (t1 - t0) / 3600
        for i in range(n):
            for j in range(i + 1, n):
                a, b = self.topo.nodes[i], self.topo.nodes[j]
                inter = self.topo.region[a] != self.topo.region[b]
                if inter and self.rng.random() < self.reroute_per_path_per_hour * dt_h:
                    self.inject("reroute", a, b, t0, self.rng.uniform(20, 120), self.rng.uniform(1.3, 1.6))
                if self.rng.random() < self.loss_burst_per_path_per_hour * dt_h:
                    self.inject("loss", a, b, t0, self.rng.uniform(3, 15), self.rng.uniform(0.02, 0.1))
        self.episodes = [e for e in self.episodes if e.end > t0]

    def _episode_arrays(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.topo.nodes)
        factor, loss = np.ones((n, n)), np.full((n, n), 0.001)
        for e in self.episodes:
            if e.start <= t < e.end:
                if e.kind == "reroute":
                    factor[e.src, e.dst] = max(factor[e.src, e.dst], e.size)
                else:
                    loss[e.src, e.dst] = max(loss[e.src, e.dst], e.size)
        return factor, loss

    # samples ---------------------------------------------------------------------------------
    def tick(self, producer, t0: float, t1: float) -> int:
        """Generate the samples of (t0, t1] for every source node; return how many."""
        topo = self.topo
        n = len(topo.nodes)
        per_pair = int(round((t1 - t0) * self.rate_hz))
        if per_pair <= 0:
            return 0
        self._random_episodes(t0, t1)
        factor, loss = self._episode_arrays(t1)
        cong = np.array([self.congestion(topo.region[x], t1) for x in topo.nodes])
        names = np.array(topo.nodes, dtype=object)
        total = 0
        for i, src in enumerate(topo.nodes):
            dst_idx = np.array([j for j in range(n) if j != i])
            ts = np.tile(np.sort(self.rng.uniform(t0, t1, per_pair)), dst_idx.size)
            dsts = np.repeat(names[dst_idx], per_pair)
            queueing = 1 + 0.25 * np.maximum(cong[i], cong[dst_idx])  # busy hours queue more
            base = np.repeat(topo.base_rtt_ms[i, dst_idx] * factor[i, dst_idx] * queueing, per_pair)
            rtt = base * self.rng.lognormal(0.0, 0.08, base.size)
            spikes = self.rng.random(base.size) < self.spike_rate
            rtt[spikes] *= self.rng.uniform(10, 100, int(spikes.sum()))
            rtt[self.rng.random(base.size) < np.repeat(loss[i, dst_idx], per_pair)] = np.nan
            producer.add_many(ts, src, dsts, "rtt_ms", rtt)
            total += ts.size
            if int(t1) != int(t0):  # once per second: NIC utilisation and TCP retransmissions
                util = float(np.clip(0.15 + 0.7 * cong[i] + self.rng.normal(0, 0.03), 0, 1))
                retrans = float(np.clip(0.002 * cong[i] + loss[i, dst_idx].mean() * 0.2, 0, 1))
                producer.add(float(int(t1)), src, "", "bw_util", util)
                producer.add(float(int(t1)), src, "", "retrans_rate", retrans)
                total += 2
            if int(t1 / 10) != int(t0 / 10):  # every 10 s a throughput test to each peer (iperf-like)
                total += self._throughput(producer, float(int(t1)), i, dst_idx, factor, loss, cong)
        return total

    def _throughput(self, producer, ts: float, i: int, dst_idx: np.ndarray, factor, loss, cong) -> int:
        """bw_gbps samples from node ``i`` to ``dst_idx``: 100 Gbit/s links less half the busier end's
        load, at most one 64 MiB window per round trip, cut by loss; a few per cent of noise."""
        rtt = self.topo.base_rtt_ms[i, dst_idx] * factor[i, dst_idx]
        cap = np.minimum(100.0 * (1 - 0.5 * np.maximum(cong[i], cong[dst_idx])), window_gbps(rtt))
        gbps = cap * np.clip(1 - 10 * loss[i, dst_idx], 0.05, 1) * self.rng.lognormal(0.0, 0.05, dst_idx.size)
        producer.add_many(np.full(dst_idx.size, ts), self.topo.nodes[i],
                          np.array(self.topo.nodes, dtype=object)[dst_idx], "bw_gbps", gbps)
        return int(dst_idx.size)

    async def run(self, producer, seconds: float, period_s: float = 0.1) -> int:
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


def compute_reports(topo: Topology, now: float, seed: int = 3, busy: frozenset[str] = frozenset()) -> list[dict]:
    """One compute.nodes report per node: accelerators by region, a fresh benchmark on some; the
    ``busy`` nodes have no free card."""
    rng = np.random.default_rng(seed)
    out = []
    for i, node in enumerate(topo.nodes):
        region = topo.region[node]
        model, cls, cards, peaks, mem_gb, mem_bw = ACCELERATORS[region]
        report = {
            "node": node, "ts": now, "region": region, "zone": topo.dc[node], "rack": topo.rack[node],
            "accel_model": model, "accel_class": cls, "cards": cards, "peak_tflops": peaks,
            "mem_gb": mem_gb, "mem_bw_gbs": mem_bw, "host_mem_gb": 1024, "host_mem_bw_gbs": 300,
            "intra_bw_gbps": 7200 if cls != "l40s" else 512, "inter_bw_gbps": 400,
            "availability": round(float(rng.uniform(0.97, 1.0)), 3),
            "idle_rate": round(float(rng.uniform(0.1, 0.9)), 3),
            "queue_delay_s": round(float(rng.uniform(0, 120)), 1),
            "free": {"cards": 0 if node in busy else cards, "mem_gb": mem_gb * cards, "host_mem_gb": 512},
            # energy: draw at full load, and the region's price and carbon intensity now
            "power_kw": round(cards * {"h100": 1.2, "a100": 0.8, "l40s": 0.6}[cls] + 1.5, 2),
            **ENERGY[region],
        }
        if i % 2 == 0:  # half the nodes have a measured benchmark: LLM training tokens/s per node
            per_card = {"h100": 9400, "a100": 2970, "l40s": 3450}[cls]
            report["benchmarks"] = [{"name": "llama-7b-train", "unit": "tokens/s", "measured_at": now - 3600,
                                     "value": round(float(rng.uniform(0.8, 1.1)) * cards * per_card, 1)}]
        out.append(report)
    return out


def history_windows(topo: Topology, pairs: list[tuple[str, str]], end: float, days: float, step_s: float = 60.0,
                    seed: int = 11) -> list[dict]:
    """Past rtt_ms window results of ``pairs`` (one per ``step_s``) for the ``days`` before ``end``:
    the base RTT, a real-time daily rhythm (busiest at 18:00 in the source's region, +60 %), a slow
    trend (+5 %/day), noise and 1 % outliers. The demo backfills DuckDB with them so that forecasts
    have history on a fresh machine; they are marked by nothing but their age."""
    rng = np.random.default_rng(seed)
    index = {n: i for i, n in enumerate(topo.nodes)}
    t = np.arange(math.floor((end - days * 86400) / step_s) * step_s, end - step_s, step_s)
    out = []
    for src, dst in pairs:
        base = topo.base_rtt_ms[index[src], index[dst]]
        local_h = ((t / 3600 + REGION_UTC_OFFSET_H[topo.region[src]]) % 24)
        rhythm = 1 + 0.3 * (1 + np.cos(2 * np.pi * (local_h - 18) / 24))
        trend = 1 + 0.05 * (t - t[0]) / 86400
        mean = base * rhythm * trend * rng.lognormal(0, 0.03, t.size)
        mean = np.where(rng.random(t.size) < 0.01, mean * 5, mean)
        for a, m in zip(t, mean, strict=True):
            m = float(m)
            out.append({"src": src, "dst": dst, "metric": "rtt_ms", "window_start": float(a),
                        "window_end": float(a + step_s), "count": 600, "kept": 590, "outliers": 10, "lost": 0,
                        "mean": m, "p50": m * 0.97, "p95": m * 1.2, "p99": m * 1.4, "min": m * 0.8, "max": m * 1.6})
    return out


@dataclass
class TaskRunner:
    """Runs placed tasks, simulated: each starts when it is placed and reports `started`, then
    `finished` with its duration and achieved throughput after ``time_scale`` x its simulated run time.

    Achieved throughput (samples/s) = ``base_rate`` x (a c + (1 - a) n) / 100 x lognormal noise, with
    c and n the compute and network scores it was placed with and ``a`` the type's *true* alpha
    (``true_alpha``, planted: what the learner should find); run time = work / throughput."""

    true_alpha: dict[str, float]
    time_scale: float = 0.01
    base_rate: float = 1000.0
    seed: int = 5
    finishing: list[tuple[float, dict]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def placed(self, decision: dict, expected_duration_s: float, now: float) -> dict | None:
        """The `started` event of a placed decision (None otherwise); schedules its `finished`."""
        if decision.get("status") != "placed" or not decision.get("candidates"):
            return None
        chosen = next((c for c in decision["candidates"] if c["node"] in decision["nodes"]), decision["candidates"][0])
        a = self.true_alpha.get(decision.get("task_type") or "", decision["alpha"])
        quality = a * chosen["compute_score"] + (1 - a) * chosen["network_score"]
        throughput = max(self.base_rate * quality / 100 * float(self.rng.lognormal(0, 0.01)), 1e-3)
        run_s = expected_duration_s * self.base_rate * 0.8 / throughput  # work sized for 80 % quality
        done = {"task_id": decision["task_id"], "event": "finished", "nodes": decision["nodes"],
                "duration_s": round(run_s, 3), "throughput": round(throughput, 3), "unit": "samples/s"}
        self.finishing.append((now + run_s * self.time_scale, done))
        return {"task_id": decision["task_id"], "event": "started", "at": now, "nodes": decision["nodes"]}

    def stop(self, task_id: str) -> None:
        """The task was preempted: it will not finish where it ran (placed again, it starts anew)."""
        self.finishing = [(t, e) for t, e in self.finishing if e["task_id"] != task_id]

    def due(self, now: float) -> list[dict]:
        """`finished` events whose time has come (stamped with their simulated finish time)."""
        ready = [(t, e) for t, e in self.finishing if t <= now]
        self.finishing = [(t, e) for t, e in self.finishing if t > now]
        return [{**e, "at": t} for t, e in ready]


def site_power_windows(site: str, end: float, days: float, step_s: float = 60.0, seed: int = 13) -> list[dict]:
    """Past `power_mw` window results of a site (one per ``step_s``): a 40 MW base with a daily rhythm,
    training jobs that start and stop in 8-20 MW steps, and checkpoint dips of a few minutes."""
    rng = np.random.default_rng(seed)
    t = np.arange(math.floor((end - days * 86400) / step_s) * step_s, end - step_s, step_s)
    mw = 40 + 6 * np.sin(2 * np.pi * (t % 86400) / 86400)
    jobs = np.zeros(t.size)
    k = 0
    while k < t.size:  # jobs: on for 30-180 minutes, off for 10-60
        on = int(rng.integers(30, 180))
        jobs[k:k + on] = rng.uniform(8, 20)
        k += on + int(rng.integers(10, 60))
    dips = rng.random(t.size) < 0.02  # checkpoints: the job's draw halves for a sample
    mw = mw + np.where(dips, 0.5, 1.0) * jobs + rng.normal(0, 0.3, t.size)
    return [{"src": site, "dst": "", "metric": "power_mw", "window_start": float(a), "window_end": float(a + step_s),
             "count": 60, "kept": 60, "outliers": 0, "lost": 0, "mean": float(m), "p50": float(m), "p95": float(m),
             "p99": float(m), "min": float(m), "max": float(m)} for a, m in zip(t, mw, strict=True)]
