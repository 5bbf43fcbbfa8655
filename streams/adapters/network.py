"""Network view: latest window statistics per path and per node, and their quality.

Adapters between the records kept in the `netstate` table and the arrays of core/quality.py.
A path record is ``{"src", "dst", "metrics": {metric: window result}}``; node-local metrics (dst
empty) form the node's record.
"""

from __future__ import annotations

import math

import numpy as np

from core.detect import DEFAULT_POLICY as DETECTOR
from core.quality import DEFAULT_MODEL, QualityModel, combine, dimension_utilities
from core.vocabulary import NETWORK_PROFILES

RACK_PREFIX = "rack:"


def rack_endpoint(rack: str, site: str = "") -> str:
    """The endpoint name of a rack's probes: ``rack:<site>/<rack>`` for a node that reports where it
    sits (its zone, else its region: rack names are local to a site, ``r1`` in two regions is two
    racks), ``rack:<rack>`` otherwise; '' for a node that reports no rack. Probes may also name a
    rack ``rack:<rack>`` where no other site has a rack of that name (PathTable takes it as an alias)."""
    if not rack:
        return ""
    return f"{RACK_PREFIX}{site}/{rack}" if site else f"{RACK_PREFIX}{rack}"


def merge_window(record: dict | None, window: dict) -> dict:
    """The record with this window result as its latest for the window's metric (newer wins)."""
    entry = {k: v for k, v in window.items() if k not in ("src", "dst", "metric")}
    return merge_metric(record, window["src"], window["dst"], window["metric"], entry)


def merge_metric(record: dict | None, src: str, dst: str, metric: str, entry: dict) -> dict:
    """:func:`merge_window` of a window result already split into its path, its metric and ``entry``
    (the rest of its fields, kept as the record's entry for the metric, not copied)."""
    rec = record or {"src": src, "dst": dst, "metrics": {}}
    old = rec["metrics"].get(metric)
    if old is None or entry["window_end"] >= old["window_end"]:
        rec["metrics"][metric] = entry
    return rec


def stat(rec: dict | None, metric: str, field: str) -> float:
    if not rec:
        return math.nan
    m = rec["metrics"].get(metric)
    v = None if m is None else m.get(field)
    return math.nan if v is None else float(v)


def path_inputs(paths: list[dict], nodes: dict[str, dict]) -> dict[str, np.ndarray]:
    """Quality inputs per path: p95 RTT, loss, bandwidth utilisation, retransmissions, jitter
    (``nodes``: node id -> its node-local record). See :meth:`PathColumns.path_inputs`."""
    local = [{"src": n, "dst": "", "metrics": (r or {}).get("metrics", {})} for n, r in nodes.items()]
    _, out = PathColumns(local + list(paths)).path_inputs()
    return out


def path_quality_table(paths: list[dict], nodes: dict[str, dict], model: QualityModel = DEFAULT_MODEL):
    """(inputs, utilities[n, 5], quality per profile {name: [n]}) for many paths at once."""
    x = path_inputs(paths, nodes)
    u = dimension_utilities(x["p95_rtt_ms"], x["loss"], x["bw_util"], x["retrans"], x["jitter_ms"], model)
    q = {name: combine(u, model.weights(name)) for name in NETWORK_PROFILES}
    return x, u, q


def window_span(records: list[dict]) -> tuple[float, float]:
    """The newest window among the records' metrics: (start, end); NaN when none."""
    best = (math.nan, -math.inf)
    for r in records:
        for m in (r or {}).get("metrics", {}).values():
            if m["window_end"] > best[1]:
                best = (m["window_start"], m["window_end"])
    return best if math.isfinite(best[1]) else (math.nan, math.nan)


class PathColumns:
    """The netstate records as columns, kept in step with every write (O(1) per window result), so
    the scheduler's path table is numpy over arrays instead of Python over dicts.

    One row per record (paths and node-local records, ``dst`` empty); names are interned to codes.
    Columns: rtt p95/p50, probes lost and counted, the means of loss_rate, bw_util and
    retrans_rate, and the median measured throughput (bw_gbps p50; NaN where the record has no such
    metric). ``hist`` keeps each path's last
    ``HISTORY`` rtt p95s (a ring per row), one per detector step of ``step_s`` seconds (the last window's of each step:
    a window ending in a newer step than the last pushed is pushed, a newer one in the same step takes
    the newest place; ``step_s`` 0: every newer window is a step): the degradation detector's memory
    (core/detect.py). The detector was tuned on one RTT a 4-minute step (the labelled RIPE Atlas traces),
    so the worker's step is 240 s (CNSCHED_DETECTOR_STEP_SECONDS) whatever its windows: 62 steps of
    10-second windows would be 10 minutes of memory, and two windows in a row 20 s, paging 24 times as
    often as measured. :meth:`seed` fills it from stored windows of steps older than any pushed (after a
    restart, the detector need not wait ``HISTORY`` steps)."""

    HISTORY = DETECTOR.memory  # 62 windows: 400,000 paths x 62 x 4 bytes = 99 MB at 5,000 nodes

    FIELDS = (("p95", "rtt_ms", "p95"), ("p50", "rtt_ms", "p50"), ("lost", "rtt_ms", "lost"),
              ("count", "rtt_ms", "count"), ("loss_rate", "loss_rate", "mean"), ("bw_util", "bw_util", "mean"),
              ("retrans", "retrans_rate", "mean"), ("end", "rtt_ms", "window_end"), ("gbps", "bw_gbps", "p50"))

    def __init__(self, records: list[dict] | None = None, step_s: float = 0.0) -> None:
        self.step_s = float(step_s)
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.rows: dict[tuple[int, int], int] = {}
        self.n = 0
        self._cap = 0
        self.src = np.zeros(0, np.int64)
        self.dst = np.zeros(0, np.int64)
        self.cols = {f: np.zeros(0) for f, _, _ in self.FIELDS}
        self.hist = np.zeros((0, self.HISTORY), np.float32)  # ms: float32 is plenty, and 400,000 paths x HISTORY
        self.hist_head = np.zeros(0, np.int64)  # each row's newest place (a ring: a push writes one value)
        self.hist_end = np.zeros(0)
        self.hist_first = np.zeros(0)  # end of the first window pushed into each row (+inf: none)
        self.hist_count = np.zeros(0, np.int64)  # windows held (at most HISTORY)
        self.answered_end = np.zeros(0)  # end of the newest rtt window in which some probe answered (-inf: none)
        self.shapes: dict = {}  # what the path table derives from the rows alone (path_shape.shape_of)
        self.writes = 0  # changes to the rows or their values (what quality_inputs is remembered by)
        self._inputs: tuple | None = None
        self.aging: tuple | None = None  # path_table.ages_of: (key, ages), per write and time
        self.empty = self.code("")
        self.set_records(records or [])

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def _grow(self) -> None:
        cap = max(64, 2 * self._cap)
        self.src = np.resize(self.src, cap)
        self.dst = np.resize(self.dst, cap)
        self.cols = {f: np.resize(v, cap) for f, v in self.cols.items()}
        self.hist = np.vstack([self.hist, np.full((cap - self._cap, self.HISTORY), np.nan, np.float32)])
        self.hist_head = np.r_[self.hist_head, np.full(cap - self._cap, self.HISTORY - 1, np.int64)]
        self.hist_end = np.r_[self.hist_end, np.full(cap - self._cap, -np.inf)]
        self.hist_first = np.r_[self.hist_first, np.full(cap - self._cap, np.inf)]
        self.hist_count = np.r_[self.hist_count, np.zeros(cap - self._cap, np.int64)]
        self.answered_end = np.r_[self.answered_end, np.full(cap - self._cap, -np.inf)]
        self._cap = cap

    def _row(self, src: str, dst: str) -> int:
        """The row of the path (added where new)."""
        s, d = self.code(src), self.code(dst)
        row = self.rows.get((s, d))
        if row is None:
            if self.n == self._cap:
                self._grow()
            row = self.rows[(s, d)] = self.n
            self.n += 1
            self.writes += 1
            self.src[row], self.dst[row] = s, d
        return row

    def set(self, rec: dict) -> None:
        self.set_records([rec])

    def set_records(self, records: list[dict]) -> None:
        """:meth:`set` of each record in turn, vectorised over runs of distinct paths (a table of
        hundreds of thousands of paths parsed at a start, a step of window results): where a path
        comes again, a new run begins, so the later follows the earlier as one by one."""
        if not records:
            return
        rows = [self._row(r["src"], r["dst"]) for r in records]
        start, seen = 0, set()
        for k, row in enumerate(rows):
            if row in seen:
                self._set_run(records[start:k], rows[start:k])
                start, seen = k, set()
            seen.add(row)
        self._set_run(records[start:], rows[start:])

    def _set_run(self, records: list[dict], rows: list[int]) -> None:
        rows = np.array(rows, np.int64)
        for field, metric, which in self.FIELDS:
            self.cols[field][rows] = [stat(r, metric, which) for r in records]
        self.writes += 1
        self._remember(rows)

    def set_many(self, src: list[str], dst: list[str], values: dict[str, np.ndarray],
                 rows: np.ndarray | None = None) -> np.ndarray:
        """Many paths' latest windows at once (``values``: a column of ``FIELDS`` -> float[P]; columns
        not given become NaN): what :meth:`set` does per record, vectorised over the rows. Returns the
        rows written; passing them back with the same paths skips looking them up."""
        if rows is None:
            rows = self.rows_of(src, dst)
        for f, _, _ in self.FIELDS:
            self.cols[f][rows] = values.get(f, np.nan)
        self.writes += 1
        self._remember(rows)
        return rows

    def _step(self, end: np.ndarray) -> np.ndarray:
        """The detector step a window ending at ``end`` falls in (its end itself where ``step_s`` is 0)."""
        return np.floor(end / self.step_s) if self.step_s > 0 else end

    def _remember(self, rows: np.ndarray) -> None:
        """Push the p95 of rows whose rtt window is newer than the last pushed and in a newer step; a
        newer window of the same step takes the newest place (rows distinct); note the rows whose peer answered."""
        end = self.cols["end"][rows]
        with np.errstate(invalid="ignore"):
            # a window of probes not all lost (no count: no probes, never an answer; no lost column: none lost)
            answered = self.cols["count"][rows] > np.nan_to_num(self.cols["lost"][rows])
        self.answered_end[rows] = np.where(answered, np.fmax(self.answered_end[rows], end), self.answered_end[rows])
        newer = end > self.hist_end[rows]  # NaN (no rtt window) is never newer
        same = newer & (self._step(end) == self._step(self.hist_end[rows]))
        r = rows[same]
        self.hist[r, self.hist_head[r]] = self.cols["p95"][r]
        self.hist_end[r] = end[same]
        new = newer & ~same
        r = rows[new]
        if r.size:
            head = self.hist_head[r] + 1
            head[head == self.HISTORY] = 0
            self.hist_head[r] = head
            self.hist[r, head] = self.cols["p95"][r]  # over the oldest
            self.hist_end[r] = end[new]
            self.hist_first[r] = np.where(self.hist_count[r] == 0, end[new], self.hist_first[r])
            self.hist_count[r] = np.minimum(self.hist_count[r] + 1, self.HISTORY)

    def seed(self, paths: list[tuple[str, str]], ends: np.ndarray, p95: np.ndarray) -> int:
        """Put stored windows (``ends``/``p95`` float[P, K], oldest first, NaN: none; one per step, as
        sinks.queries.recent_windows gives them with the same step) in front of the windows each path
        already holds: only those of steps before its first held one, as many as there is room for.
        Returns the windows added."""
        added = 0
        for (src, dst), e, v in zip(paths, ends, p95, strict=True):
            row = self._row(src, dst)
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(e) & (self._step(e) < self._step(self.hist_first[row]))
            take = min(int(ok.sum()), self.HISTORY - int(self.hist_count[row]))
            if take <= 0:
                continue
            held = int(self.hist_count[row])
            self.hist[row, (self.hist_head[row] - held - take + 1 + np.arange(take)) % self.HISTORY] = v[ok][-take:]
            if held == 0:
                self.hist_end[row] = e[ok][-1]
            answered = ok & np.isfinite(v)  # a stored window with a p95: its peer answered then
            if answered.any():
                self.answered_end[row] = max(self.answered_end[row], float(e[answered].max()))
            self.hist_first[row] = e[ok][-take]
            self.hist_count[row] = held + take
            added += take
        return added

    def history(self, rows: np.ndarray) -> np.ndarray:
        """float[rows, HISTORY]: the rows' last rtt p95s, one per window, oldest first (NaN: none)."""
        rows = np.asarray(rows, np.int64)
        at = (self.hist_head[rows][:, None] + 1 + np.arange(self.HISTORY)) % self.HISTORY
        return self.hist[rows[:, None], at]

    def rows_of(self, src: list[str], dst: list[str]) -> np.ndarray:
        """The rows of these paths (added where new)."""
        return np.array([self._row(a, b) for a, b in zip(src, dst, strict=True)], np.int64)

    def path_inputs(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(rows of the paths, their quality inputs), vectorised.

        Loss is the worse of the active-probe loss (lost / count of rtt_ms) and a reported loss_rate;
        utilisation and retransmissions come from the path if reported there, else from the busier
        endpoint's NIC (node-local bw_util / retrans_rate)."""
        n = self.n
        src, dst = self.src[:n], self.dst[:n]
        c = {f: v[:n] for f, v in self.cols.items()}
        local = np.full(len(self.names), -1, np.int64)
        is_local = dst == self.empty
        local[src[is_local]] = np.flatnonzero(is_local)
        rows = np.flatnonzero(~is_local)
        with np.errstate(invalid="ignore", divide="ignore"):
            count = c["count"][rows]
            probe_loss = np.where(count > 0, c["lost"][rows] / count, np.nan)
        out = {"p95_rtt_ms": c["p95"][rows].copy(), "jitter_ms": c["p95"][rows] - c["p50"][rows],
               "loss": np.fmax(probe_loss, c["loss_rate"][rows])}
        ends = (local[src[rows]], local[dst[rows]])
        for col, field in (("bw_util", "bw_util"), ("retrans", "retrans")):
            v = c[field][rows].copy()
            at_ends = [np.where(e >= 0, c[field][np.maximum(e, 0)], np.nan) for e in ends]
            out[col] = np.where(np.isnan(v), np.fmax(*at_ends), v)
        return rows, out

    def quality_inputs(self) -> tuple[np.ndarray, dict, np.ndarray]:
        """(rows, :meth:`path_inputs`, their dimension utilities float[rows, 5] under the default
        quality model), once per write: every profile's path table of one network version shares
        them (read-only)."""
        key = (self.writes, self.n, len(self.names))
        if self._inputs is None or self._inputs[0] != key:
            rows, x = self.path_inputs()
            u = dimension_utilities(x["p95_rtt_ms"], x["loss"], x["bw_util"], x["retrans"], x["jitter_ms"])
            for v in (rows, u, *x.values()):
                v.flags.writeable = False
            self._inputs = (key, (rows, x, u))
        return self._inputs[1]

    def column(self, field: str, rows: np.ndarray) -> np.ndarray:
        """One raw column (``FIELDS``) at ``rows``."""
        return self.cols[field][:self.n][rows]

    def local_value(self, node: str, field: str) -> float:
        row = self.rows.get((self.codes.get(node, -1), self.empty))
        return math.nan if row is None else float(self.cols[field][row])
