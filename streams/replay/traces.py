"""Job traces and network measurements in their upstream formats, as arrays.

Jobs (:class:`JobTrace`, sorted by submission):
- Philly (DIR-LAB extract): ``u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status``
  — ``interval`` is seconds since the previous submission (submit = running sum);
- ITP (elasticflow): ``cluster,job_id,submission_time,duration,num_gpu`` — no node count: a job of g
  GPUs spans ceil(g / 8) 8-GPU servers; no user, no status (Pass).
- generic: ``submit_s,duration_s,gpus,nodes,user,status,type[,data_gb,data_site]`` (a user's own).
Network (:class:`SitePaths`): Skyplane ``latency.csv`` (ping min/avg/max/mdev RTT, ms) and
``throughput.csv`` (iperf3 Gbit/s received), PREMIUM tier only, one snapshot of directed pairs; or
the generic long format ``t_s,src_site,dst_site,rtt_ms[,gbps][,loss]`` (rows without ``t_s`` are one
snapshot; with it, each row is the pair's values from ``t_s`` seconds after the trace's start on,
stepped as the replay's clock passes them (streams/replay/dynamics.py), and the snapshot that picks
the sites is every pair's average, min and max). A missing bandwidth is filled by :func:`fill_gbps`
(printed with the results); a missing loss is 0.

Bad input raises :class:`TraceError` naming the file, the row (1 = the header) and the field.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streams.replay.dynamics import PairSeries, from_rows


class TraceError(ValueError):
    """A trace that cannot be read: ``file: row N: field: why``."""


@dataclass
class JobTrace:
    source: str
    submit_s: np.ndarray  # float64[J], from the trace start
    duration_s: np.ndarray  # float64[J]
    gpus: np.ndarray  # int64[J]
    nodes: np.ndarray  # int64[J]
    user: list[str]
    status: list[str]
    job_type: list[str] | None = None  # generic traces only
    data_gb: np.ndarray | None = None
    data_site: list[str] | None = None
    skipped: dict[str, int] = field(default_factory=dict)  # rows not replayed, by why (``cpu_only``: no GPU)

    def __len__(self) -> int:
        return int(self.submit_s.size)


@dataclass
class SitePaths:
    sites: list[str]
    rtt_ms: np.ndarray  # float64[S, S] average RTT (NaN: not measured)
    rtt_min_ms: np.ndarray
    rtt_max_ms: np.ndarray
    rtt_mdev_ms: np.ndarray
    gbps: np.ndarray  # float64[S, S] received throughput (NaN: not measured)
    series: PairSeries | None = None  # the pairs' values over time (generic rows with t_s)


def _rows(path: Path, required: tuple[str, ...]):
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"{path}: row 1: missing column(s) {', '.join(missing)}")
    return reader


def _num(path: Path, row: int, rec: dict, field: str, minimum: float | None = 0.0, optional: bool = False) -> float:
    raw = rec.get(field)
    if optional and (raw is None or raw.strip() == ""):
        return math.nan
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: row {row}: {field}: not a number ({raw!r})") from None
    if not math.isfinite(v) or (minimum is not None and v < minimum):
        raise TraceError(f"{path}: row {row}: {field}: must be a finite number >= {minimum:g}, got {raw}")
    return v


def load_philly(path) -> JobTrace:
    path = Path(path)
    cols = ("user", "gpu_num", "node_num", "interval", "run_time", "new_status")
    submit, dur, gpus, nodes, users, status, t, cpu_only = [], [], [], [], [], [], 0.0, 0
    for i, rec in enumerate(_rows(path, cols), start=2):
        t += _num(path, i, rec, "interval")  # a skipped row's interval still moves the clock
        g = int(_num(path, i, rec, "gpu_num", 0))
        run = _num(path, i, rec, "run_time")
        if g == 0:  # a CPU-only job (Helios has them in this format): not a job for a GPU scheduler
            cpu_only += 1
            continue
        submit.append(t)
        dur.append(run)
        gpus.append(g)
        nodes.append(max(int(_num(path, i, rec, "node_num", 0)), 1))
        users.append(rec["user"])
        status.append(rec["new_status"])
    return _sorted(JobTrace("philly", np.array(submit), np.array(dur), np.array(gpus, np.int64),
                            np.array(nodes, np.int64), users, status, skipped={"cpu_only": cpu_only} if cpu_only else {}))


def load_itp(path, cluster: str | None = None) -> JobTrace:
    """The ITP trace, or one of its clusters (``cluster``: its ten clusters' traces are concatenated,
    each timed from its own start, so together they are ten clusters' load on one)."""
    path = Path(path)
    submit, dur, gpus, cpu_only, seen = [], [], [], 0, set()
    for i, rec in enumerate(_rows(path, ("submission_time", "duration", "num_gpu")), start=2):
        if cluster is not None:
            seen.add(rec.get("cluster"))
            if rec.get("cluster") != cluster:
                continue
        at, run, g = _num(path, i, rec, "submission_time"), _num(path, i, rec, "duration"), int(_num(path, i, rec, "num_gpu", 0))
        if g == 0:
            cpu_only += 1
            continue
        submit.append(at)
        dur.append(run)
        gpus.append(g)
    if cluster is not None and not submit:
        raise TraceError(f"{path}: no jobs of cluster {cluster!r}; its clusters: {', '.join(sorted(map(str, seen)))}")
    g = np.array(gpus, np.int64)
    n = len(g)
    return _sorted(JobTrace("itp" if cluster is None else f"itp {cluster}", np.array(submit), np.array(dur), g, -(-g // 8), [""] * n, ["Pass"] * n,
                            skipped={"cpu_only": cpu_only} if cpu_only else {}))


def load_generic_jobs(path) -> JobTrace:
    path = Path(path)
    rows = _rows(path, ("submit_s", "duration_s", "gpus", "nodes", "user", "status", "type"))
    submit, dur, gpus, nodes, users, status, types, data_gb, data_site = [], [], [], [], [], [], [], [], []
    for i, rec in enumerate(rows, start=2):
        submit.append(_num(path, i, rec, "submit_s"))
        dur.append(_num(path, i, rec, "duration_s"))
        gpus.append(int(_num(path, i, rec, "gpus", 0)))
        nodes.append(int(_num(path, i, rec, "nodes", 1)))
        users.append(rec["user"])
        status.append(rec["status"])
        types.append(rec["type"])
        data_gb.append(_num(path, i, rec, "data_gb", optional=True) if "data_gb" in rec else math.nan)
        data_site.append(rec.get("data_site") or "")
    return _sorted(JobTrace("generic", np.array(submit), np.array(dur), np.array(gpus, np.int64),
                            np.array(nodes, np.int64), users, status, types, np.nan_to_num(np.array(data_gb)),
                            data_site))


def _sorted(trace: JobTrace) -> JobTrace:
    order = np.argsort(trace.submit_s, kind="stable")

    def pick(xs):
        return None if xs is None else [xs[i] for i in order]

    return JobTrace(trace.source, trace.submit_s[order], trace.duration_s[order], trace.gpus[order],
                    trace.nodes[order], pick(trace.user), pick(trace.status), pick(trace.job_type),
                    None if trace.data_gb is None else trace.data_gb[order], pick(trace.data_site), dict(trace.skipped))


FILL_RULE = "missing gbps: 10 Gbit/s within a site region (RTT < 2 ms), else 8 x 64 MiB / RTT (one 64 MiB TCP window per round trip), at most 10 Gbit/s"


def fill_gbps(rtt_ms: np.ndarray) -> np.ndarray:
    """Bandwidth where none was measured: see ``FILL_RULE``."""
    rtt = np.asarray(rtt_ms, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        window = 64 * 2**20 * 8 / 1e9 / (rtt / 1000.0)  # Gbit per second
    return np.where(rtt < 2.0, 10.0, np.minimum(window, 10.0))


def load_generic_network(path) -> SitePaths:
    path = Path(path)
    rows = list(enumerate(_rows(path, ("src_site", "dst_site", "rtt_ms")), start=2))
    sites = sorted({r[k] for _, r in rows for k in ("src_site", "dst_site")})
    idx = {x: k for k, x in enumerate(sites)}
    S = len(sites)
    acc = {k: np.zeros((S, S)) for k in ("sum", "n", "gbps_sum", "gbps_n")}
    lo, hi = np.full((S, S), np.inf), np.full((S, S), -np.inf)
    timed = []  # (t_s, src, dst, rtt, gbps, loss) of rows with a time
    for i, r in rows:
        a, b = idx[r["src_site"]], idx[r["dst_site"]]
        v = _num(path, i, r, "rtt_ms")
        t = _num(path, i, r, "t_s", optional=True) if "t_s" in r else math.nan
        if not math.isnan(t):
            loss = _num(path, i, r, "loss", optional=True) if "loss" in r else math.nan
            if loss > 1:
                raise TraceError(f"{path}: row {i}: loss: a fraction in [0, 1], got {r['loss']}")
            timed.append((t, a, b, v, _num(path, i, r, "gbps", optional=True) if "gbps" in r else math.nan, loss))
        acc["sum"][a, b] += v
        acc["n"][a, b] += 1
        lo[a, b], hi[a, b] = min(lo[a, b], v), max(hi[a, b], v)
        g = _num(path, i, r, "gbps", optional=True) if "gbps" in r else math.nan
        if not math.isnan(g):
            acc["gbps_sum"][a, b] += g
            acc["gbps_n"][a, b] += 1
    with np.errstate(invalid="ignore"):
        rtt = np.where(acc["n"] > 0, acc["sum"] / acc["n"], np.nan)
        gbps = np.where(acc["gbps_n"] > 0, acc["gbps_sum"] / acc["gbps_n"], fill_gbps(rtt))
    seen = acc["n"] > 0
    nan = np.full((S, S), np.nan)
    series = from_rows(*zip(*timed, strict=True)) if timed else None
    return SitePaths(sites, rtt, np.where(seen, lo, np.nan), np.where(seen, hi, np.nan), nan,
                     np.where(seen, gbps, np.nan), series)


def load_skyplane(latency_path, throughput_path) -> SitePaths:
    """Directed site pairs of the PREMIUM tier: RTT (ms) and throughput (Gbit/s)."""
    lat_path, thr_path = Path(latency_path), Path(throughput_path)
    lat = [(i, r) for i, r in enumerate(_rows(lat_path, ("src_region", "dst_region", "src_tier", "dst_tier",
                                                         "min_rtt", "avg_rtt", "max_rtt", "mdev_rtt")), start=2)
           if r["src_tier"] == "PREMIUM" and r["dst_tier"] == "PREMIUM"]
    thr = [(i, r) for i, r in enumerate(_rows(thr_path, ("src_region", "dst_region", "src_tier", "dst_tier",
                                                         "throughput_received_gbps", "success")), start=2)
           if r["src_tier"] == "PREMIUM" and r["dst_tier"] == "PREMIUM" and r["success"] == "True"]
    sites = sorted({r[k] for _, r in lat + thr for k in ("src_region", "dst_region")})
    idx = {s: k for k, s in enumerate(sites)}
    S = len(sites)
    mats = {k: np.full((S, S), np.nan) for k in ("avg_rtt", "min_rtt", "max_rtt", "mdev_rtt", "gbps")}
    for i, r in lat:
        a, b = idx[r["src_region"]], idx[r["dst_region"]]
        for k in ("avg_rtt", "min_rtt", "max_rtt", "mdev_rtt"):  # the spread may be missing
            mats[k][a, b] = _num(lat_path, i, r, k, optional=k != "avg_rtt")
    for i, r in thr:
        mats["gbps"][idx[r["src_region"]], idx[r["dst_region"]]] = _num(thr_path, i, r, "throughput_received_gbps")
    return SitePaths(sites, mats["avg_rtt"], mats["min_rtt"], mats["max_rtt"], mats["mdev_rtt"], mats["gbps"])


def head(trace: JobTrace, n: int) -> JobTrace:
    """The first ``n`` jobs (by submission)."""
    def cut(xs):
        return None if xs is None else xs[:n]

    return JobTrace(trace.source, trace.submit_s[:n], trace.duration_s[:n], trace.gpus[:n], trace.nodes[:n],
                    trace.user[:n], trace.status[:n], cut(trace.job_type), cut(trace.data_gb), cut(trace.data_site),
                    dict(trace.skipped))
