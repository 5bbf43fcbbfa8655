"""Event-time windows over probe batches for one source partition, kept as mergeable sketches.

Samples go into *panes* of gcd(size, step) seconds, one sketch per (series, pane); a window of
``size`` seconds starting at every multiple of ``step`` is the merge of its panes (tumbling: one
pane per window). Memory per (series, pane) is bounded by the sketch, whatever the sample rate.

The watermark is the largest event time seen minus the allowed lateness; a window is final once its
end is at or below the watermark. Samples whose panes belong only to final windows are late:
counted and dropped. Nothing here reads the wall clock, so replaying old samples gives the results a
live run gave.

Idempotence: every pane remembers the offset of the last source message applied to it, so a message
replayed after a crash is applied to the panes that do not have it yet and to no other
(streams/worker/panes.py: their wire format; streams/worker/ingest.py: how they are persisted).
"""

from __future__ import annotations

import math

import numpy as np

from core.sketch import DEFAULT_MAPPING, Mapping, SketchSet, merge_sets, sketch_groups
from core.sketch_stats import stats_many
from core.windowstats import DEFAULT_HAMPEL_K, STAT_FIELDS
from schemas.probe import ProbeBatch, concat_batches
from streams.worker.panes import Pane, PartitionMark, decode_pane, encode_pane

Series = tuple[str, str, str]  # src, dst, metric
PaneKey = tuple[str, str, str, int]  # src, dst, metric, pane start (whole seconds)

_CONSOLIDATE_CHUNKS = 32


class PartitionWindows:
    def __init__(
        self,
        size_s: int,
        step_s: int,
        lateness_s: float,
        hampel_k: float = DEFAULT_HAMPEL_K,
        mapping: Mapping = DEFAULT_MAPPING,
    ) -> None:
        if size_s < 1 or step_s < 1 or step_s > size_s:
            raise ValueError("window size and step must be whole seconds with 1 <= step <= size")
        self.size_s = int(size_s)
        self.step_s = int(step_s)
        self.pane_s = math.gcd(self.size_s, self.step_s)
        self.lateness_s = float(lateness_s)
        self.hampel_k = hampel_k
        self.mapping = mapping
        self.mark = PartitionMark()
        self.panes: dict[PaneKey, Pane] = {}
        self.dirty: set[PaneKey] = set()
        self.dropped: set[PaneKey] = set()  # deleted since the last snapshot
        self.late_samples = 0
        self.replayed_samples = 0
        # after a restore, messages up to this offset may be in some panes already: apply them
        # one by one so each pane takes exactly the messages it lacks
        self.replay_horizon = -1

    # ------------------------------------------------------------------ windows of a pane
    def _last_window_end(self, pane_start: float) -> float:
        return math.floor(pane_start / self.step_s) * self.step_s + self.size_s

    def _windows_of(self, pane_start: int) -> range:
        """Starts of the windows that contain the pane."""
        first = math.ceil((pane_start + self.pane_s - self.size_s) / self.step_s) * self.step_s
        last = math.floor(pane_start / self.step_s) * self.step_s
        return range(first, last + 1, self.step_s)

    @property
    def watermark(self) -> float:
        return self.mark.max_ts - self.lateness_s

    # ------------------------------------------------------------------------------ add
    def add_many(self, batches: list[ProbeBatch], offsets: list[int]) -> int:
        """Apply consecutive messages of this partition (in offset order) with one kernel call.

        The result equals applying them one by one with ``close_ready`` after each: a message's
        samples are late when their windows had closed by the watermark of the messages before it.
        Messages past the replay horizon are merged into one batch; a pane touched by it then holds
        every message up to the last offset, which is what its applied offset says.
        """
        thresholds = []
        max_ts = self.mark.max_ts
        for b in batches:
            thresholds.append(max(self.mark.closed_before, max_ts - self.lateness_s))
            if len(b):
                max_ts = max(max_ts, float(b.ts.max()))
        late = 0
        i = 0
        # a message at or below an offset already applied here — replayed after a restore, or delivered
        # twice (the embedded broker re-sends a partition's last record) — and every message after it
        # in an out-of-order group go one by one, so each pane takes exactly the messages it lacks
        horizon = max(self.replay_horizon, self.mark.applied_offset)
        if any(a >= b for a, b in zip(offsets, offsets[1:], strict=False)):
            i = len(batches)
        else:
            i = next((k for k, o in enumerate(offsets) if o > horizon), len(batches))
        for k in range(i):
            late += self.add(batches[k], offsets[k], thresholds[k])
        rest = batches[i:]
        if rest:
            per_row = np.concatenate([np.full(len(b), t) for b, t in zip(rest, thresholds[i:], strict=True)])
            late += self.add(concat_batches(rest), offsets[-1], per_row)
        return late

    def add(self, batch: ProbeBatch, offset: int = -1, late_before: float | np.ndarray | None = None) -> int:
        """Apply one message's valid samples (one kernel call); return the late sample count.

        ``offset`` is the source offset of the message; panes that already hold it skip it. A
        sample is late when the last window of its pane ends at or before ``late_before``
        (default: the end of what was emitted so far).
        """
        n = len(batch)
        if n == 0:
            self.mark.applied_offset = max(self.mark.applied_offset, offset)
            return 0
        pane = np.floor(batch.ts / self.pane_s).astype(np.int64)
        pane_start = pane * self.pane_s
        last_end = np.floor(pane_start / self.step_s) * self.step_s + self.size_s
        on_time = last_end > (self.mark.closed_before if late_before is None else late_before)
        late = int(n - np.count_nonzero(on_time))
        if late:
            batch = batch.take(on_time)
            pane = pane[on_time]
        if late and 0 <= offset <= self.mark.applied_offset:  # a message applied before (replayed after a
            self.replayed_samples += late  # restore, or sent twice): its samples in closed windows were
            late = 0  # counted when it first came; they are replayed, not late
        if len(batch):
            self._apply(batch, pane, offset)
            self.mark.max_ts = max(self.mark.max_ts, float(batch.ts.max()))
        self.mark.applied_offset = max(self.mark.applied_offset, offset)
        self.late_samples += late
        return late

    def _apply(self, batch: ProbeBatch, pane: np.ndarray, offset: int) -> None:
        p0 = int(pane.min())
        n_dst, n_met = len(batch.dst_names), len(batch.metric_names)
        n_pane = int(pane.max()) - p0 + 1
        if len(batch.src_names) * n_dst * n_met * n_pane < 2**62:  # one int64 code per (series, pane)
            code = ((batch.src.astype(np.int64) * n_dst + batch.dst) * n_met + batch.metric) * n_pane + (pane - p0)
            gs = sketch_groups(code, batch.value, self.mapping)
            rest, pi = np.divmod(gs.code, n_pane)
            rest, mi = np.divmod(rest, n_met)
            si, di = np.divmod(rest, n_dst)
            pane_of = pi + p0
        else:  # a big message (many names, panes far apart): the code would overflow, so dense codes first
            series, s_code = np.unique(np.stack([batch.src, batch.dst, batch.metric], axis=1), axis=0,
                                       return_inverse=True)
            panes_present, p_code = np.unique(pane, return_inverse=True)
            code = s_code.ravel().astype(np.int64) * panes_present.size + p_code.ravel()
            gs = sketch_groups(code, batch.value, self.mapping)
            rest, pi = np.divmod(gs.code, panes_present.size)
            si, di, mi = series[rest].T
            pane_of = panes_present[pi]
        src_names, dst_names, met_names = batch.src_names, batch.dst_names, batch.metric_names
        pane_start = (pane_of * self.pane_s).tolist()
        start = gs.start.tolist()
        panes, dirty, dropped = self.panes, self.dirty, self.dropped
        for g, (s_i, d_i, m_i, ps, cnt, lost, lo, hi) in enumerate(zip(
            si.tolist(), di.tolist(), mi.tolist(), pane_start, gs.count.tolist(), gs.lost.tolist(),
            gs.vmin.tolist(), gs.vmax.tolist(), strict=True,
        )):
            pkey = (src_names[s_i], dst_names[d_i], met_names[m_i], ps)
            p = panes.get(pkey)
            if p is None:
                p = panes[pkey] = Pane()
            elif offset >= 0 and p.applied_offset >= offset:
                self.replayed_samples += cnt
                continue
            a, b = start[g], start[g + 1]
            p.keys.append(gs.key[a:b])
            p.counts.append(gs.bcount[a:b])
            p.sums.append(gs.bsum[a:b])
            p.count += cnt
            p.lost += lost
            if lo < p.vmin:
                p.vmin = lo
            if hi > p.vmax:
                p.vmax = hi
            if offset > p.applied_offset:
                p.applied_offset = offset
            dirty.add(pkey)
            dropped.discard(pkey)
            if len(p.keys) > _CONSOLIDATE_CHUNKS:
                self._consolidate([p])

    # ---------------------------------------------------------------------------- close
    def advance(self, event_time: float) -> None:
        """Move event time forward without samples (an idle partition: see Ingest.close_idle)."""
        if event_time > self.mark.max_ts:
            self.mark.max_ts = float(event_time)

    def close_ready(self) -> list[dict]:
        """Results of every window whose end is at or below the watermark, oldest first."""
        return self._close(self.watermark)

    def flush_all(self) -> list[dict]:
        """Close every window (end of input, offline use)."""
        return self._close(math.inf)

    def _close(self, upto: float) -> list[dict]:
        lo = self.mark.closed_before
        if upto <= lo:
            return []
        if math.isfinite(lo) and math.isfinite(upto):
            # window ends lie on size + k * step: is there one in (lo, upto]?
            next_end = self.size_s + self.step_s * (math.floor((lo - self.size_s) / self.step_s) + 1)
            if next_end > upto:
                self.mark.closed_before = upto
                return []
        groups: dict[tuple[Series, int], list[Pane]] = {}
        for (src, dst, metric, ps), p in self.panes.items():
            for w in self._windows_of(ps):
                end = w + self.size_s
                if lo < end <= upto:
                    groups.setdefault(((src, dst, metric), w), []).append(p)
        results = self._results(groups) if groups else []
        self.mark.closed_before = upto
        for pkey in [k for k in self.panes if self._last_window_end(k[3]) <= upto]:
            del self.panes[pkey]
            self.dirty.discard(pkey)
            self.dropped.add(pkey)
        return results

    def _results(self, groups: dict[tuple[Series, int], list[Pane]]) -> list[dict]:
        order = sorted(groups, key=lambda sw: (sw[1], sw[0]))
        merged = _merge_panes([groups[sw] for sw in order])
        stats = stats_many(merged, self.mapping, self.hampel_k)
        out = []
        for g, ((src, dst, metric), w) in enumerate(order):
            row = stats[g]
            rec = {"src": src, "dst": dst, "metric": metric, "window_start": float(w),
                   "window_end": float(w + self.size_s)}
            for i, f in enumerate(STAT_FIELDS):
                rec[f] = int(row[i]) if i < 4 else float(row[i])
            out.append(rec)
        return out

    # ----------------------------------------------------------------------- persistence
    def _consolidate(self, panes: list[Pane]) -> None:
        """Merge each pane's bucket chunks into one sorted chunk (one kernel call for all)."""
        if not panes:
            return
        m = _merge_panes([[p] for p in panes])
        for g, p in enumerate(panes):
            k, c, s = m.buckets(g)
            p.keys, p.counts, p.sums = [k], [c], [s]

    def take_changes(self) -> tuple[PartitionMark, dict[PaneKey, bytes], set[PaneKey]]:
        """What to persist since the last call: the mark, changed panes (encoded), dropped panes."""
        changed = [self.panes[k] for k in self.dirty]
        self._consolidate(changed)
        out = {k: encode_pane(self.panes[k]) for k in self.dirty}
        dropped = set(self.dropped)
        self.dirty.clear()
        self.dropped.clear()
        return PartitionMark(**vars(self.mark)), out, dropped

    def restore(self, mark: PartitionMark, panes: dict[PaneKey, bytes]) -> None:
        self.mark = PartitionMark(**vars(mark))
        self.panes = {k: decode_pane(v) for k, v in panes.items()}
        self.replay_horizon = max([p.applied_offset for p in self.panes.values()] + [mark.applied_offset])
        self.dirty.clear()
        self.dropped.clear()


def warm_up() -> None:
    """Compile (or load from the numba cache) every kernel the ingest path uses, on tiny inputs,
    so the first real messages are not delayed by compilation."""
    from schemas.probe import encode_arrow

    w = PartitionWindows(2, 1, 0)
    b = encode_arrow([10.0, 10.5, 11.0], ["a", "a", "a"], ["b", "b", "b"], ["rtt_ms"] * 3, [1.0, float("nan"), 2.0])
    from schemas.probe import decode_samples

    w.add_many([decode_samples(b)], [0])
    w.take_changes()
    w.flush_all()


def _merge_panes(groups: list[list[Pane]]) -> SketchSet:
    """One sketch per group of panes, merged in one kernel call."""
    chunk_group, chunk_len, keys, counts, sums = [], [], [], [], []
    sgid, sc, sl, smin, smax = [], [], [], [], []
    for g, panes in enumerate(groups):
        for p in panes:
            sgid.append(g)
            sc.append(p.count)
            sl.append(p.lost)
            smin.append(p.vmin)
            smax.append(p.vmax)
            for k in p.keys:
                chunk_group.append(g)
                chunk_len.append(k.size)
            keys += p.keys
            counts += p.counts
            sums += p.sums
    gid = np.repeat(np.array(chunk_group, dtype=np.int64), np.array(chunk_len, dtype=np.int64))
    return merge_sets(len(groups), gid, _cat(keys, np.int32), _cat(counts, np.int64),
                      _cat(sums, np.float64), np.array(sgid, dtype=np.int64), np.array(sc, dtype=np.int64),
                      np.array(sl, dtype=np.int64), np.array(smin, dtype=np.float64),
                      np.array(smax, dtype=np.float64))


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
