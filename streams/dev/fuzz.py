"""`cnsched fuzz` (and `make fuzz`): a campaign of hostile messages over every input topic,
interleaved with valid probe samples, through the real broker into a real worker and sink.

It reports what an operator needs to trust the pipeline with untrusted producers:
- crashes: the worker and the sink still running, agent crashes and tracebacks in their logs, and
  messages whose handling raised (dead-lettered as `internal_error`: handled, but unforeseen);
- dead letters by topic and reason, and *vanished* messages: hostile messages with no dead letter
  (for the sink: with no `sink_rejects` row), which must be 0;
- the valid windows: every window of the valid series, as emitted on netstate.windows and as stored
  in DuckDB, equal to the windows computed here from what was sent (count, kept, mean, min, max);
- the worker's memory: resident set size before the campaign and its peak during it.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np

from schemas.topics import (
    COMPUTE_DEADLETTER,
    COMPUTE_NODES,
    NETSTATE_WINDOWS,
    PROBE_DEADLETTER,
    PROBE_SAMPLES,
    SCHED_DEADLETTER,
    SCHED_EVENTS,
    SCHED_TASKS,
)
from streams.config import Settings
from streams.dev.hostile import hostile
from streams.dev.ready import until_listed
from streams.kafka import consumer, ensure_topics, producer
from streams.runtime.processes import start_command, start_worker, stop_process

VALID_SOURCES = 8
VALID_EVERY = 10  # one valid probe message per this many hostile ones
DEADLETTER_OF = {PROBE_SAMPLES: PROBE_DEADLETTER, COMPUTE_NODES: COMPUTE_DEADLETTER,
                 SCHED_TASKS: SCHED_DEADLETTER, SCHED_EVENTS: SCHED_DEADLETTER}


def fuzz_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"idle_close_seconds": 2.0, "max_message_bytes": 256 * 1024,
                                       "window_seconds": 10, "window_step_seconds": 10,
                                       "allowed_lateness_seconds": 1.0, "flush_interval_seconds": 0.5,
                                       # every hostile message's reject row is looked for: none pruned
                                       "sink_rejects_max_rows": 10_000_000})


def valid_messages(rng: np.random.Generator, now: float, count: int) -> list[tuple[str, list[dict]]]:
    """``count`` JSON probe messages of the valid series, in event-time order over 200 s ending 60 s
    ago (each partition sees its samples in order, so none is late). Within a window a series holds one
    value (a value per series and window): no sample is an outlier, so every statistic is known exactly."""
    t0 = math.floor((now - 260) / 10) * 10
    out = []
    for i in range(count):
        k = i % VALID_SOURCES
        ts = t0 + 200.0 * i / max(count, 1)
        value = 1.0 + ((7 * k + int(ts // 10)) % 10) / 10
        rows = [{"ts": ts + 0.001 * j, "src": f"fz-v{k}", "dst": "fz-y", "metric": "rtt_ms", "value": value}
                for j in range(int(rng.integers(1, 6)))]
        out.append((f"fz-v{k}", rows))
    return out


def expected_windows(msgs: list[tuple[str, list[dict]]], size_s: int = 10) -> dict:
    by: dict[tuple, list[float]] = {}
    for _, rows in msgs:
        for r in rows:
            by.setdefault((r["src"], r["dst"], "rtt_ms", math.floor(r["ts"] / size_s) * size_s), []).append(r["value"])
    return {k: {"count": len(v), "kept": len(v), "mean": sum(v) / len(v), "min": min(v), "max": max(v)}
            for k, v in by.items()}


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


async def send_all(settings: Settings, rng, now: float, n: int) -> tuple[list, list]:
    """Send the campaign; return hostile [(topic, partition, offset, kind)] and the valid messages sent."""
    p = producer(settings, max_request_size=8 << 20)
    await p.start()
    valid = valid_messages(rng, now, (n + VALID_EVERY - 1) // VALID_EVERY)
    sent, pending = [], []

    async def settle():
        return [(t, m.partition, m.offset, k) for t, k, m in [(t, k, await f) for t, k, f in pending]]

    try:
        gen = hostile(rng, now, n, settings.max_message_bytes, settings.max_clock_skew_seconds,
                      settings.max_sample_age_seconds)
        for i, (topic, key, value, kind) in enumerate(gen):
            pending.append((topic, kind, await p.send(settings.topic(topic), value, key=key)))
            if i % VALID_EVERY == 0:
                src, rows = valid[i // VALID_EVERY]
                await p.send(settings.topic(PROBE_SAMPLES), json.dumps(rows).encode(), key=src.encode())
            if len(pending) >= 2000:
                sent += await settle()
                pending = []
        await p.flush()
        sent += await settle()
    finally:
        await p.stop()
    return sent, valid


async def read_topic(settings: Settings, name: str, idle_s: float = 3.0, limit_s: float = 120.0) -> list[bytes]:
    """Every message of topic ``name`` (unprefixed), from the start until it has been quiet for ``idle_s``."""
    c = consumer(settings, name, group_id=None, max_partition_fetch_bytes=16 << 20)
    await c.start()
    out: list[bytes] = []
    quiet_since, end = time.monotonic(), time.monotonic() + limit_s
    try:
        while time.monotonic() - quiet_since < idle_s and time.monotonic() < end:
            batch = await c.getmany(timeout_ms=500, max_records=50_000)
            got = [m.value for msgs in batch.values() for m in msgs]
            if got:
                out += got
                quiet_since = time.monotonic()
    finally:
        await c.stop()
    return out


def worker_counter(port: int, name: str) -> float:
    """The sum of a counter over its labels, from the worker's /metrics (nan when it does not answer)."""
    import urllib.request

    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return math.nan
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith((f"cnsched_{name} ", f"cnsched_{name}{{")))


async def wait_drained(settings: Settings, probe_messages: int, worker, limit_s: float) -> None:
    """Until the worker has read every probe message (or ``limit_s`` passed, or it died)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end and worker.poll() is None:
        if await asyncio.to_thread(worker_counter, settings.web_port, "messages_total") >= probe_messages:
            break
        await asyncio.sleep(1.0)
    await asyncio.sleep(3 * settings.idle_close_seconds + 2 * settings.flush_interval_seconds)


def dead_letters(settings: Settings, raw: dict[str, list[bytes]]) -> tuple[set, Counter]:
    """The (topic, partition, offset) of every dead-lettered message, and the counts by topic and reason."""
    sources, reasons = set(), Counter()
    for values in raw.values():
        for v in values:
            d = json.loads(v)
            src = d["source"]
            topic = src["topic"].removeprefix(settings.topic_prefix)
            sources.add((topic, src["partition"], src["offset"]))
            for reason in d["reason"].split(","):
                reasons[f"{topic}:{reason}"] += 1
    return sources, reasons


def window_check(settings: Settings, expected: dict, emitted: list[bytes]) -> dict:
    got: dict = {}
    for v in emitted:
        r = json.loads(v)
        if r["src"].startswith("fz-v"):
            got[(r["src"], r["dst"], r["metric"], r["window_start"])] = r
    wrong = [k for k, e in expected.items() if k not in got or not _same(got[k], e)]
    extra = [k for k in got if k not in expected]
    return {"expected": len(expected), "emitted": len(got), "wrong_or_missing": len(wrong), "extra": len(extra)}


def _same(a: dict, e: dict) -> bool:
    return all(math.isclose(a[f], v, rel_tol=1e-9) if f == "mean" else a[f] == v for f, v in e.items())


def log_problems(*logs: Path) -> dict:
    out = {}
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        out[log.stem] = {"tracebacks": text.count("Traceback"), "agent_crashes": text.count("crashed")}
    return out


async def sample_rss(pid: int, out: list[float]) -> None:
    while True:
        out.append(rss_mb(pid))
        await asyncio.sleep(0.5)


def sink_check(settings: Settings, sent: list, expected: dict, limit_s: float = 60.0) -> dict:
    """Once the sink's tables stop growing: hostile compute reports and malformed task events without
    a sink_rejects row (well-formed events about unknown tasks are stored, as every event is), and the
    valid windows as stored."""
    from sinks.duckdb_store import DuckStore, StoreError

    def counts():
        with DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=30) as s:
            return s.query("SELECT (SELECT count(*) FROM sink_rejects), (SELECT count(*) FROM windows)")[0]

    last, stable_since, end = None, time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < end and time.monotonic() - stable_since < 4:
        try:
            now = counts()
        except StoreError:
            now = None
        if now != last:
            last, stable_since = now, time.monotonic()
        time.sleep(0.5)
    with DuckStore.open(settings.duckdb_path, read_only=True, timeout_s=30) as s:
        rejected = {(t.removeprefix(settings.topic_prefix), p, o)
                    for t, p, o in s.query('SELECT topic, part, "offset" FROM sink_rejects')}
        rows = s.query("SELECT src, dst, metric, window_start, count, kept, mean, min, max FROM windows "
                       "WHERE src LIKE 'fz-v%'")
    must = [(t, p, o) for t, p, o, kind in sent
            if t == COMPUTE_NODES or (t == SCHED_EVENTS and kind != "unknown_task")]
    stored = {r[:4]: dict(zip(("count", "kept", "mean", "min", "max"), r[4:], strict=True)) for r in rows}
    wrong = [k for k, e in expected.items() if k not in stored or not _same(stored[k], e)]
    return {"rejects_expected": len(must), "vanished": sum(1 for m in must if m not in rejected),
            "windows_stored": len(stored), "windows_wrong_or_missing": len(wrong)}


async def run_fuzz(settings: Settings, messages: int, seed: int, workdir: Path, limit_s: float = 900.0) -> dict:
    settings = fuzz_settings(settings)
    await ensure_topics(settings)
    worker = start_worker(settings, workdir / "worker.log")
    sink = start_command(settings, workdir / "sink.log", "sink")
    rss: list[float] = []
    sink_rss: list[float] = []
    try:
        await until_listed(settings.web_port, worker=worker)
        rss_before = rss_mb(worker.pid)
        sampler = asyncio.create_task(sample_rss(worker.pid, rss))
        sink_sampler = asyncio.create_task(sample_rss(sink.pid, sink_rss))
        started = time.perf_counter()
        sent, valid = await send_all(settings, np.random.default_rng(seed), time.time(), messages)
        probes = sum(1 for t, *_ in sent if t == PROBE_SAMPLES) + len(valid)
        await wait_drained(settings, probes, worker, limit_s)
        seconds = time.perf_counter() - started
        sampler.cancel()
        raw = {t: await read_topic(settings, t) for t in set(DEADLETTER_OF.values())}
        emitted = await read_topic(settings, NETSTATE_WINDOWS)
        failed = await asyncio.to_thread(worker_counter, settings.web_port, "messages_failed_total")
        expected = expected_windows(valid)
        sink_report = await asyncio.to_thread(sink_check, settings, sent, expected)
        sink_sampler.cancel()
        alive = {"worker": worker.poll() is None, "sink": sink.poll() is None}
    finally:
        stop_process(worker)
        stop_process(sink)
    sources, reasons = dead_letters(settings, raw)
    vanished = Counter(f"{t}:{kind}" for t, p, o, kind in sent if (t, p, o) not in sources)
    return {
        "messages": {"hostile": len(sent), "valid_probe": len(valid), "seconds": round(seconds, 1),
                     "per_topic": dict(Counter(t for t, *_ in sent))},
        "crashes": {"worker_alive": alive["worker"], "sink_alive": alive["sink"],
                    **{f"{k}_{m}": v for k, d in log_problems(workdir / "worker.log", workdir / "sink.log").items()
                       for m, v in d.items()},
                    "internal_errors": sum(v for k, v in reasons.items() if k.endswith(":internal_error")),
                    "handling_failures": failed},
        "dead_letters": dict(sorted(reasons.items())),
        "vanished": {"worker": sum(vanished.values()), "sink": sink_report["vanished"],
                     **{f"by_kind.{k}": v for k, v in sorted(vanished.items())}},
        "windows": {**window_check(settings, expected, emitted),
                    "stored": sink_report["windows_stored"],
                    "stored_wrong_or_missing": sink_report["windows_wrong_or_missing"]},
        "memory_mb": {"before": round(rss_before, 1), "peak": round(max(rss, default=math.nan), 1),
                      "growth": round(max(rss, default=math.nan) - rss_before, 1),
                      "sink_peak": round(max(sink_rss, default=math.nan), 1)},
    }


def passed(r: dict) -> bool:
    """0 crashes, 0 vanished messages, every valid window exact (emitted and stored)."""
    c, w = r["crashes"], r["windows"]
    return (c["worker_alive"] and c["sink_alive"] and c["worker_tracebacks"] == 0 and c["sink_tracebacks"] == 0
            and c["internal_errors"] == 0 and r["vanished"]["worker"] == 0 and r["vanished"]["sink"] == 0
            and w["wrong_or_missing"] == 0 and w["extra"] == 0 and w["stored_wrong_or_missing"] == 0)
