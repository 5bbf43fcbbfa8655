"""The request-routing replay (issue 54; `cnsched simulate --requests`): a real inference request trace
(Azure's LLM conversation trace, ../shared/data/inference/azure_llm_2023: arrival times, prompt and
output tokens) served by replicas in K regions drawn per seed from the Skyplane matrix, each request
sent by a routing policy; what its users wait for.

The world, per seed:
- sites: K regions drawn from the regions Skyplane measured with each other (cluster.draw_sites); the
  users are at those K regions too, each region's share of the requests drawn per seed (Dirichlet,
  concentration 1.5: some regions have more users than their replicas serve); a request's origin is
  drawn by those shares.
- RTT user → replica: the measured RTT between the regions plus ``last_mile_ms`` (a user is not in
  the data centre; 10 ms, assumed), over time driven by the real RIPE Atlas series as every replay's
  site pairs are (dynamics.rtt_dynamics).
- a replica: one instance of Llama-2-70B on H100-80GB (tensor parallel 2) serving up to ``slots``
  requests at once (continuous batching); a request takes its prefill, ``prefill_ms + per_token x
  prompt`` (11.7 ms + 0.152 ms a token), then its output tokens at ``tbt_ms + per_active x active``
  each (36.7 ms + 0.46 ms per request in the batch) — least-squares fits to the measurements Splitwise
  (Patel et al., ISCA 2024) published with its simulator (github.com/Mutinifni/splitwise-sim,
  data/perf_model.csv: prompt 128–4,096 tokens at batch 1, 49–642 ms; a token 37 ms at batch 1, 52 ms
  at batch 32). A request waits when every slot is busy.
- TTFT: the RTT (there and the first token back) + the wait + the prefill; end to end: TTFT + the
  output's time.

Policies (every one with the same replicas: equal GPU-hours):
- ``ours``: the weights core.routing computes every ``route_step_s`` (what the worker publishes on
  sched.routes) from what it measures then — the RTT now, each origin's request rate over the last
  step, a replica's capacity from the completions seen (slots over the mean service time) — applied
  as HAProxy applies them with ``balance leastconn``: the replica with the fewest outstanding
  requests per unit of weight;
- ``nearest``: the region nearest the user (lowest RTT now), its least loaded replica (geo-DNS);
- ``least-loaded``: the replica with the fewest outstanding requests anywhere (a global leastconn);
- ``nearest-spill``: the nearest region unless its replicas hold ``spill_at`` x their slots or more
  outstanding, then the next nearest that does not (geo-DNS with a load balancer's spill-over).
A surge (``surge`` x the rate within ``surge_ramp_s``, for ``surge_s`` from ``surge_at_s``) replays
extra copies of the window's own requests (their sizes real) at times drawn uniformly in the window.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.routing import split
from streams.replay.traces import TraceError

POLICIES = ("ours", "nearest", "least-loaded", "nearest-spill")
BASELINES = ("nearest", "least-loaded", "nearest-spill")


@dataclass(frozen=True)
class RequestTrace:
    t_s: np.ndarray  # float64[R] arrival, seconds from the first
    prompt: np.ndarray  # int64[R] tokens
    output: np.ndarray  # int64[R] tokens

    def __len__(self) -> int:
        return int(self.t_s.size)


@dataclass(frozen=True)
class Serving:
    slots: int = 16
    prefill_ms: float = 11.7
    prefill_ms_per_token: float = 0.152
    tbt_ms: float = 36.7
    tbt_ms_per_active: float = 0.46

    def prefill_s(self, prompt: int) -> float:
        return (self.prefill_ms + self.prefill_ms_per_token * prompt) / 1e3

    def decode_s(self, output: int, active: int) -> float:
        return output * (self.tbt_ms + self.tbt_ms_per_active * active) / 1e3


@dataclass(frozen=True)
class RequestWorld:
    sites: int = 4
    replicas_per_site: int = 2
    last_mile_ms: float = 10.0
    route_step_s: float = 10.0
    spill_at: float = 0.8
    slo_ttft_s: float = 1.0
    surge: float = 1.0
    surge_at_s: float = 1800.0
    surge_s: float = 600.0
    surge_ramp_s: float = 60.0
    serving: Serving = Serving()


def load_azure_llm(path) -> RequestTrace:
    """``TIMESTAMP,ContextTokens,GeneratedTokens`` as Azure ships it; TraceError naming the file, row and
    field of anything else."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None
    if not lines or [c.strip() for c in lines[0].split(",")] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
        raise TraceError(f"{path}: the header must be TIMESTAMP,ContextTokens,GeneratedTokens")
    t, p, o = [], [], []
    days: dict[str, float] = {}
    for row, line in enumerate(lines[1:], start=2):
        parts = line.split(",")
        if len(parts) != 3:
            raise TraceError(f"{path} row {row}: 3 fields expected, got {len(parts)}")
        stamp, prompt, out = parts
        date, _, clock = stamp.strip().partition(" ")
        try:
            if date not in days:
                days[date] = np.datetime64(date, "s").astype(np.int64).item()
            h, m, s = clock.split(":")
            t.append(days[date] + int(h) * 3600 + int(m) * 60 + float(s))
        except ValueError:
            raise TraceError(f"{path} row {row} TIMESTAMP: {stamp!r} is not YYYY-MM-DD HH:MM:SS[.f]") from None
        for name, v, acc in (("ContextTokens", prompt, p), ("GeneratedTokens", out, o)):
            if not v.strip().isdigit():
                raise TraceError(f"{path} row {row} {name}: {v!r} is not a whole number of tokens")
            acc.append(int(v))
    if not t:
        raise TraceError(f"{path}: no requests")
    order = np.argsort(np.array(t), kind="stable")
    ts = np.array(t)[order]
    return RequestTrace(ts - ts[0], np.array(p, np.int64)[order], np.array(o, np.int64)[order])


def surged(trace: RequestTrace, w: RequestWorld, rng) -> tuple[RequestTrace, np.ndarray]:
    """The trace with the surge's extra requests (and bool[R']: in the surge window)."""
    t, p, o = trace.t_s, trace.prompt, trace.output
    lo, hi = w.surge_at_s, w.surge_at_s + w.surge_s
    if w.surge > 1:
        inside = np.flatnonzero((t >= lo) & (t < hi))
        extra, times, idx = w.surge - 1, [], []
        for j in range(int(math.ceil(extra))):  # each round copies up to every request once
            when = lo + rng.random(inside.size) * (hi - lo)
            ramp = np.clip((when - lo) / max(w.surge_ramp_s, 1e-9), 0, 1)  # the full surge within the ramp
            keep = rng.random(inside.size) < min(extra - j, 1.0) * ramp
            times.append(when[keep])
            idx.append(inside[keep])
        t = np.concatenate([t, *times])
        p = np.concatenate([p, *(trace.prompt[i] for i in idx)])
        o = np.concatenate([o, *(trace.output[i] for i in idx)])
    order = np.argsort(t, kind="stable")
    t, p, o = t[order], p[order], o[order]
    return RequestTrace(t, p, o), (t >= lo) & (t < hi)


@dataclass
class Served:
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    in_surge: np.ndarray
    route_ms: list  # ours: each weight computation's time
    replica: np.ndarray = None  # int64[R] where each request went


def serve(trace: RequestTrace, origin: np.ndarray, rtt_at, n_sites: int, w: RequestWorld, policy: str) -> Served:
    """One policy over the requests (``origin[i]``: the user region of request i; ``rtt_at(t)``:
    float64[K, K] RTT ms user region -> replica region at time t)."""
    sv, k = w.serving, n_sites
    rep_site = np.repeat(np.arange(k), w.replicas_per_site)
    n_rep = rep_site.size
    active, outstanding = np.zeros(n_rep, np.int64), np.zeros(n_rep, np.int64)
    waiting = [deque() for _ in range(n_rep)]
    n = len(trace)
    ttft, e2e = np.full(n, np.nan), np.full(n, np.nan)
    done: list = []  # (time, kind, request, replica): kind 0 a request reaches its replica, 1 it completes
    weights, next_route, seen, served_s, route_ms = None, -math.inf, [], [], []
    rtt_sent, chosen = np.zeros(n), np.zeros(n, np.int64)

    def start(i: int, r: int, at: float) -> None:
        active[r] += 1
        pre = sv.prefill_s(int(trace.prompt[i]))
        took = pre + sv.decode_s(int(trace.output[i]), int(active[r]))
        ttft[i] = at + pre + rtt_sent[i] / 2 - trace.t_s[i]
        e2e[i] = at + took + rtt_sent[i] / 2 - trace.t_s[i]
        served_s.append(took)
        heapq.heappush(done, (at + took, 1, i, r))

    def settle(until: float) -> None:
        while done and done[0][0] <= until:
            at, kind, i, r = heapq.heappop(done)
            if kind == 0:
                if active[r] < sv.slots:
                    start(i, r, at)
                else:
                    waiting[r].append(i)
            else:
                active[r] -= 1
                outstanding[r] -= 1
                if waiting[r]:
                    start(waiting[r].popleft(), r, at)

    for i in range(n):
        t = float(trace.t_s[i])
        settle(t)
        rtt = rtt_at(t)  # [K, K] ms
        o = int(origin[i])
        to_rep = rtt[o, rep_site]
        if policy == "ours" and t >= next_route:
            weights, ms = _route(rtt, rep_site, seen, t, w, served_s, k)
            route_ms.append(ms)
            next_route = t + w.route_step_s
        r = _choose(policy, o, rtt, rep_site, outstanding, weights, w)
        seen.append((t, o))
        outstanding[r] += 1
        chosen[i], rtt_sent[i] = r, to_rep[r] / 1e3
        heapq.heappush(done, (t + rtt_sent[i] / 2, 0, i, r))
    settle(math.inf)
    return Served(ttft, e2e, np.zeros(n, bool), route_ms, chosen)


def _choose(policy: str, o: int, rtt: np.ndarray, rep_site: np.ndarray, outstanding: np.ndarray, weights,
            w: RequestWorld) -> int:
    """The replica a request from region ``o`` goes to under ``policy`` (see the module)."""
    to_rep = rtt[o, rep_site]
    nearest = rep_site == rep_site[np.argmin(to_rep)]
    if policy == "ours":  # HAProxy's leastconn within the weights: outstanding per unit of weight
        wo = weights[o]
        if not (wo > 0).any():
            return int(np.argmin(to_rep))
        return int(np.argmin(np.where(wo > 0, (outstanding + 1) / np.maximum(wo, 1e-12), np.inf)))
    if policy == "nearest":
        return _least(outstanding, nearest)
    if policy == "least-loaded":
        return _least(outstanding, np.ones(rep_site.size, bool))
    if policy == "nearest-spill":
        for s in np.argsort(rtt[o], kind="stable"):
            mine = rep_site == s
            if outstanding[mine].sum() < w.spill_at * w.serving.slots * mine.sum():
                return _least(outstanding, mine)
        return _least(outstanding, nearest)
    raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")


def _least(outstanding: np.ndarray, among: np.ndarray) -> int:
    return int(np.argmin(np.where(among, outstanding, np.iinfo(np.int64).max)))


def _route(rtt, rep_site, seen, t, w: RequestWorld, served_s, k) -> tuple[np.ndarray, float]:
    """Ours: the weights core.routing computes from what is measured at ``t`` (see the module), and
    the computation's time in ms."""
    began = time.perf_counter()
    lam = np.zeros(k)
    for at, o in reversed(seen):
        if at < t - w.route_step_s:
            break
        lam[o] += 1.0 / w.route_step_s
    sv = w.serving
    mean_s = float(np.mean(served_s[-500:])) if served_s else sv.prefill_s(1000) + sv.decode_s(200, sv.slots // 2)
    mu = np.full(rep_site.size, sv.slots / mean_s)
    s = split(rtt[:, rep_site] / 1e3, np.maximum(lam, 1e-3), mu, np.ones(rep_site.size, bool))
    return s.x, (time.perf_counter() - began) * 1e3


def replay_requests(trace: RequestTrace, paths, series, w: RequestWorld, seeds, policies=POLICIES) -> dict:
    """Every policy over every seed (see the module): per policy the pooled TTFT and end-to-end
    percentiles and SLO attainment, and per seed what ours' comparisons need."""
    from streams.replay.cluster import draw_sites

    per: dict = {p: [] for p in policies}
    for seed in seeds:
        rng = np.random.default_rng(seed + 211)
        idx = draw_sites(paths, w.sites, seed)
        base = paths.rtt_ms[np.ix_(idx, idx)].copy()
        np.fill_diagonal(base, 0.0)
        shares = rng.dirichlet(np.full(w.sites, 1.5))
        tr, in_surge = surged(trace, w, rng)
        origin = rng.choice(w.sites, size=len(tr), p=shares)
        for p in policies:  # each reads the RTT series from its start
            rtt_at = _rtt_over_time(base, series, float(tr.t_s[-1]) + 1.0, seed, w.last_mile_ms)
            s = serve(tr, origin, rtt_at, w.sites, w, p)
            s.in_surge = in_surge
            per[p].append(s)
    return {"policies": {p: _summary(runs, w) for p, runs in per.items()}, "runs": per}


def _rtt_over_time(base: np.ndarray, series, horizon_s: float, seed: int, last_mile_ms: float):
    """rtt_at(t): float64[K, K] RTT ms at t (the measured RTT x the pair's series' ratio, + the last mile)."""
    from streams.replay.dynamics import rtt_dynamics

    if not series:
        fixed = base + last_mile_ms
        return lambda t: fixed
    ps = rtt_dynamics(np.where(base > 0, base, 0.0), series, horizon_s, seed)
    steps = ps.steps()
    times = np.array([s[0] for s in steps])
    now = base.copy()
    state = {"k": 0}

    def at(t: float) -> np.ndarray:
        while state["k"] < len(steps) and times[state["k"]] <= t:
            _, a, b = steps[state["k"]]
            for j in range(a, b):
                now[ps.src[j], ps.dst[j]] = ps.rtt_ms[j]
            state["k"] += 1
        return now + last_mile_ms

    return at


def _summary(runs: list[Served], w: RequestWorld) -> dict:
    ttft = np.concatenate([r.ttft_s for r in runs])
    e2e = np.concatenate([r.e2e_s for r in runs])
    surge = np.concatenate([r.in_surge for r in runs])
    ms = [x for r in runs for x in r.route_ms]
    q = np.nanpercentile
    out = {"requests": int(ttft.size / len(runs)), "ttft_p50_s": float(q(ttft, 50)), "ttft_p99_s": float(q(ttft, 99)),
           "e2e_p50_s": float(q(e2e, 50)), "e2e_p99_s": float(q(e2e, 99)),
           "slo_attainment": float(np.mean(ttft <= w.slo_ttft_s)),
           "slo_attainment_surge": float(np.mean(ttft[surge] <= w.slo_ttft_s)) if surge.any() else None}
    if ms:
        out["route_ms_p50"], out["route_ms_p99"] = float(np.percentile(ms, 50)), float(np.percentile(ms, 99))
    return out


def compare(result: dict, w: RequestWorld, baselines=BASELINES) -> list[dict]:
    """Ours against each baseline: per seed the SLO misses' difference (percentage points, all requests
    and the surge's) and the p99 TTFT's change; mean and 95 % t-interval over seeds."""
    from core.intervals import t_interval

    runs = result["runs"]
    rows = []
    for base in baselines:
        if base not in runs or "ours" not in runs:
            continue
        for name, f in (("slo_miss_pp", lambda r: 100 * np.mean(r.ttft_s > w.slo_ttft_s)),
                        ("slo_miss_surge_pp", lambda r: 100 * np.mean(r.ttft_s[r.in_surge] > w.slo_ttft_s)
                         if r.in_surge.any() else np.nan),
                        ("ttft_p99_change", None), ("ttft_mean_change", None)):
            if f is None:
                stat = np.percentile if name == "ttft_p99_change" else None
                d = [(np.percentile(a.ttft_s, 99) / np.percentile(b.ttft_s, 99) - 1) if stat else
                     (np.mean(a.ttft_s) / np.mean(b.ttft_s) - 1) for a, b in zip(runs["ours"], runs[base], strict=True)]
            else:
                d = [f(a) - f(b) for a, b in zip(runs["ours"], runs[base], strict=True)]
            est, lo, hi = t_interval(d)
            rows.append({"against": base, "metric": name, "change": est, "ci_low": lo, "ci_high": hi, "seeds": len(d)})
    return rows
