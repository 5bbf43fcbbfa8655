"""The network over time in the replay: each site pair's RTT, bandwidth and loss as a series of
values, each holding from its time until the pair's next one (stepped as the replay's clock passes).

Two sources:
- measured rows: the generic network format with ``t_s`` (seconds from the trace's second 0), each
  row a pair's values from then on (:func:`from_rows`; a pair keeps its first row's values before it);
- real RTT series (:func:`rtt_dynamics`): every site pair driven by one of the labelled RIPE Atlas
  series (``../shared/data/rtt/real_labelled``, one sample each 240 s), assigned to pairs by the seed,
  each starting at a seeded offset and wrapping: the pair's RTT is its measured base RTT x the
  series' ratio to its own median, the same both ways; a failed ping (no sample) is an outage of
  that step (loss 1, which leaves 5 % of the bandwidth: streams/replay/world.py). Bandwidth is the
  measured one (only loss cuts it). A value is emitted only when the ratio moved more than
  ``tolerance`` from the pair's last emitted value (or the outage began or ended): the replay's
  probes see every emitted step; jitter below it is left to the probes' own noise (core.observe).

Inside a site (issue 53, E5: :func:`uplink_dynamics`), each rack's uplink is driven the same way by a
real RTT series of its own: its ratio to the series' median multiplies the in-site RTT of every path
crossing the uplink and divides the uplink's capacity (an assumption, stated: queueing that doubles
the RTT leaves half the capacity to a new flow; a ratio below 1 counts as 1 — the nominal figures
are the uplink's best —, and a failed ping carries the last ratio: no loss inside a site). Every row also says whether a labelled change point is there (``change``: the series'
labels, either direction, any size — what the replay's "after a change" jobs are flagged by; the
detector's events are the sustained rises of at least ``RISE`` x among them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RISE = 1.2  # a labelled change whose new level is this x the old one (as `cnsched bench detect` counts events)


@dataclass
class PairSeries:
    """Rows sorted by time: from ``t_s[i]`` the pair ``src[i] -> dst[i]`` (site indices) has these
    values (NaN bandwidth or loss: unchanged)."""

    t_s: np.ndarray  # float64[R]
    src: np.ndarray  # int64[R]
    dst: np.ndarray  # int64[R]
    rtt_ms: np.ndarray  # float64[R]
    gbps: np.ndarray  # float64[R]
    loss: np.ndarray  # float64[R] fraction
    change: np.ndarray | None = None  # bool[R] a labelled change point is at the row (None: none known)

    def __len__(self) -> int:
        return int(self.t_s.size)

    def restricted(self, idx: list[int]) -> PairSeries:
        """The rows between the sites ``idx``, renumbered by their position there."""
        pos = np.full(max(int(self.src.max(initial=0)), int(self.dst.max(initial=0)), max(idx, default=0)) + 1, -1)
        pos[np.array(idx, np.int64)] = np.arange(len(idx))
        keep = (pos[self.src] >= 0) & (pos[self.dst] >= 0)
        return PairSeries(self.t_s[keep], pos[self.src[keep]], pos[self.dst[keep]], self.rtt_ms[keep],
                          self.gbps[keep], self.loss[keep], None if self.change is None else self.change[keep])

    def first_values(self, rtt: np.ndarray, gbps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rtt, gbps, loss) [S, S] at the start: each pair's first row, else the given snapshot."""
        rtt, gbps, loss = rtt.copy(), gbps.copy(), np.zeros_like(rtt)
        for i in range(len(self) - 1, -1, -1):  # backwards: the earliest row of a pair is written last
            self.apply(i, rtt, gbps, loss)
        return rtt, gbps, loss

    def apply(self, i: int, rtt: np.ndarray, gbps: np.ndarray, loss: np.ndarray) -> None:
        a, b = self.src[i], self.dst[i]
        rtt[a, b] = self.rtt_ms[i]
        if not np.isnan(self.gbps[i]):
            gbps[a, b] = self.gbps[i]
        if not np.isnan(self.loss[i]):
            loss[a, b] = self.loss[i]

    def steps(self) -> list[tuple[float, int, int]]:
        """(time, first row, end row) of each distinct time: one replay event applies them all."""
        return _steps(self.t_s)


@dataclass
class RackSeries:
    """Rows sorted by time: from ``t_s[i]`` rack ``rack[i]``'s uplink (racks numbered site-major) runs at
    ``ratio[i]`` x its RTT and 1/``ratio[i]`` of its capacity; ``change``: a labelled change point is there."""

    t_s: np.ndarray  # float64[R]
    rack: np.ndarray  # int64[R]
    ratio: np.ndarray  # float64[R]
    change: np.ndarray  # bool[R]

    def __len__(self) -> int:
        return int(self.t_s.size)

    def steps(self) -> list[tuple[float, int, int]]:
        return _steps(self.t_s)


def _steps(t_s: np.ndarray) -> list[tuple[float, int, int]]:
    if not t_s.size:
        return []
    cut = np.flatnonzero(np.diff(t_s)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [t_s.size]])
    return [(float(t_s[s]), int(s), int(e)) for s, e in zip(starts, ends, strict=True)]


def from_rows(t_s, src, dst, rtt_ms, gbps, loss, change=None) -> PairSeries:
    order = np.argsort(np.asarray(t_s, np.float64), kind="stable")
    cols = (np.asarray(t_s, np.float64), np.asarray(src, np.int64), np.asarray(dst, np.int64),
            np.asarray(rtt_ms, np.float64), np.asarray(gbps, np.float64), np.asarray(loss, np.float64))
    return PairSeries(*(x[order] for x in cols), None if change is None else np.asarray(change, bool)[order])


def quantised(ratio: np.ndarray, outage: np.ndarray, tolerance: float) -> np.ndarray:
    """Indices of the steps a pair emits: the first, and each where the ratio moved more than
    ``tolerance`` (relative) from the last emitted one, or the outage began or ended."""
    out, last, down = [0], ratio[0], outage[0]
    for i in range(1, ratio.size):
        if outage[i] != down or (not outage[i] and abs(ratio[i] / last - 1.0) > tolerance):
            out.append(i)
            down = outage[i]
            if not outage[i]:
                last = ratio[i]
    return np.array(out, np.int64)


def rtt_dynamics(base_rtt: np.ndarray, series: list, horizon_s: float, seed: int,
                 tolerance: float = 0.1) -> PairSeries:
    """Every site pair (both ways) driven by a real RTT series up to ``horizon_s`` (see the module).
    ``series``: streams.analytics.rtt_series.LabelledSeries."""
    if not series:
        raise ValueError("no RTT series to drive the network with")
    rng = np.random.default_rng(seed + 61)
    k = base_rtt.shape[0]
    rows = []
    for a in range(k):
        for b in range(a + 1, k):
            t, ratio, outage, change = driven(series, rng, horizon_s, tolerance)
            for x, y in ((a, b), (b, a)):
                rows.append((t, np.full(t.size, x), np.full(t.size, y), base_rtt[a, b] * ratio,
                             np.full(t.size, np.nan), np.where(outage, 1.0, 0.0), change))
    if not rows:
        return from_rows(*([] for _ in range(7)))
    return from_rows(*(np.concatenate([r[i] for r in rows]) for i in range(7)))


def uplink_dynamics(racks: int, series: list, horizon_s: float, seed: int, tolerance: float = 0.1) -> RackSeries:
    """Every rack's uplink driven by a real RTT series of its own up to ``horizon_s`` (see the module)."""
    if not series:
        raise ValueError("no RTT series to drive the uplinks with")
    rng = np.random.default_rng(seed + 67)
    cols = []
    for g in range(racks):
        t, ratio, _, change = driven(series, rng, horizon_s, tolerance)
        cols.append((t, np.full(t.size, g), np.maximum(ratio, 1.0), change))  # nominal is its best
    if not cols:
        return RackSeries(np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool))
    t, g, ratio, change = (np.concatenate([c[i] for c in cols]) for i in range(4))
    order = np.argsort(t, kind="stable")
    return RackSeries(t[order], g[order].astype(np.int64), ratio[order], change[order])


def driven(series: list, rng, horizon_s: float, tolerance: float):
    """One path's steps from a series drawn by ``rng``, from a drawn start, wrapping: (time s, ratio to
    the series' median — a failed ping's carried —, outage, a labelled change point) of each emitted step
    (:func:`quantised`; a labelled change point it does not emit gets a row of its own holding the
    values in force: the flag without a change below the tolerance)."""
    s = series[int(rng.integers(len(series)))]
    n = int(np.ceil(horizon_s / s.step_s)) + 1
    idx = (int(rng.integers(s.rtt.size)) + np.arange(n)) % s.rtt.size  # a seeded start, wrapping
    rtt = s.rtt[idx]
    outage = np.isnan(rtt)
    median = np.nanmedian(s.rtt) if np.isfinite(s.rtt).any() else 1.0
    ratio = np.where(outage, 1.0, rtt / median)
    ratio = np.where(outage, _carried(ratio, outage), ratio)
    change = s.change[idx]
    emitted = quantised(ratio, outage, tolerance)
    keep = np.union1d(emitted, np.flatnonzero(change))
    held = emitted[np.searchsorted(emitted, keep, side="right") - 1]  # a change point's row holds what is in force
    return keep * s.step_s, ratio[held], outage[held], change[keep]


def _carried(ratio: np.ndarray, outage: np.ndarray) -> np.ndarray:
    """Each step's last ratio before it that was measured (1 before the first)."""
    good = np.where(~outage, np.arange(ratio.size), -1)
    last = np.maximum.accumulate(good)
    return np.where(last >= 0, ratio[np.maximum(last, 0)], 1.0)
