"""Event-time windows over decoded probe batches, finalised by a watermark (not by wall clock).

One accumulator per source partition. The watermark is the largest event time seen minus the
allowed lateness; a window is final once its end is at or below the watermark, and samples that
arrive for a final window are counted as late and dropped.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from core.windowstats import DEFAULT_HAMPEL_K, window_starts, window_stats_reference
from schemas.probe import ProbeBatch

Key = tuple[str, str, str, float]  # src, dst, metric, window_start


class WindowAccumulator:
    def __init__(
        self,
        size_s: int,
        step_s: int,
        lateness_s: float,
        hampel_k: float = DEFAULT_HAMPEL_K,
    ) -> None:
        self.size_s = size_s
        self.step_s = step_s
        self.lateness_s = lateness_s
        self.hampel_k = hampel_k
        self.max_ts = -np.inf
        self.closed_before = -np.inf  # every window with end <= this was emitted
        self._values: dict[Key, list[np.ndarray]] = defaultdict(list)
        self.late_samples = 0

    @property
    def watermark(self) -> float:
        return self.max_ts - self.lateness_s

    def add(self, batch: ProbeBatch) -> int:
        """Add a batch; return how many of its samples were too late for every window."""
        if len(batch) == 0:
            return 0
        rows, starts = window_starts(batch.ts, self.size_s, self.step_s)
        open_ = starts + self.size_s > self.closed_before
        late = len(batch) - np.unique(rows[open_]).size
        rows, starts = rows[open_], starts[open_]
        if rows.size:
            order = np.lexsort((starts, batch.metric[rows], batch.dst[rows], batch.src[rows]))
            rows, starts = rows[order], starts[order]
            s, d, m = batch.src[rows], batch.dst[rows], batch.metric[rows]
            change = np.flatnonzero(
                (np.diff(s) != 0) | (np.diff(d) != 0) | (np.diff(m) != 0) | (np.diff(starts) != 0)
            ) + 1
            bounds = np.concatenate(([0], change, [rows.size]))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                key = (
                    batch.src_names[s[a]],
                    batch.dst_names[d[a]],
                    batch.metric_names[m[a]],
                    float(starts[a]),
                )
                self._values[key].append(batch.value[rows[a:b]])
        self.max_ts = max(self.max_ts, float(batch.ts.max()))
        self.late_samples += late
        return late

    def close_ready(self) -> list[dict]:
        """Results of every window whose end is at or below the watermark."""
        return self._close(self.watermark)

    def flush_all(self) -> list[dict]:
        return self._close(np.inf)

    def _close(self, upto: float) -> list[dict]:
        ready = sorted(k for k in self._values if k[3] + self.size_s <= upto)
        out = []
        for key in ready:
            src, dst, metric, start = key
            stats = window_stats_reference(np.concatenate(self._values.pop(key)), self.hampel_k)
            out.append(
                {"src": src, "dst": dst, "metric": metric, "window_start": start,
                 "window_end": start + self.size_s, **stats}
            )
        if upto > self.closed_before:
            # windows end on multiples of step: everything ending <= upto is final now
            self.closed_before = upto if np.isinf(upto) else upto
        return out
