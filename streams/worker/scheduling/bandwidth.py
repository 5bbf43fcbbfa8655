"""Bandwidth booked by placements (issue 53): a placement that will send across a path books the rate
it expects to send there, and the decisions after it read what is left of the path — not only what the
last probe window measured, which cannot show traffic that has not started yet.

- A gang whose members sit in several racks books, on every path between two of its racks (both
  ways), its communication share times the narrowest bandwidth it was costed with: the mean rate its
  all-reduce sends (core.ect's model: it communicates that share of its time at that bandwidth).
- A task that loads data books, on the path from the data's endpoint to each member's rack, the
  bandwidth its load was costed with, for as long as the load is expected to take.
- A booking counts against its path until the path's next probe window ends after it (from then the
  window measures the traffic itself: counting both would count it twice), until it is expected to
  end, or until its task ends, whichever is first. Paths are the rack-level paths the path table reads (a node without a rack
  books nothing).
- What is left of a path: its bandwidth less what is booked on it, at least ``HEADROOM_FLOOR`` of it
  (a shared path still moves some data).
"""

from __future__ import annotations

import weakref

import numpy as np

from core.ect import booked_left
from core.quality import HEADROOM_FLOOR


class Booked(dict):
    """:meth:`PathBook.unseen`'s {(source, destination): Gbit/s}, with the same rates by source
    (``by_source[src][dst]``, summed in the same order: the same floats) kept in step, so the paths
    from one source are read without a pass over every booking (:func:`booked_per_rack`)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_source: dict[str, dict[str, float]] = {}
        self.source_changes: dict[str, int] = {}  # bookings added from each source (what was read of one stays)
        self.pairs: tuple | None = None  # booked_between's sorted rack pairs (the codes, keys, rates) until the next add

    def add(self, src: str, dst: str, gbps: float) -> None:
        self[(src, dst)] = self.get((src, dst), 0.0) + gbps
        row = self.by_source.setdefault(src, {})
        row[dst] = row.get(dst, 0.0) + gbps
        self.source_changes[src] = self.source_changes.get(src, 0) + 1
        self.pairs = None


class PathBook:
    """Rates booked on paths by endpoint names (rack endpoints, or a data endpoint as source)."""

    def __init__(self) -> None:
        # (task, source endpoint, destination endpoint, Gbit/s, booked at, until)
        self.entries: list[tuple[str, str, str, float, float, float]] = []
        # the last sum: (table it was read on, the first ``until`` among the entries, the sum); entries
        # added since are added to it (a burst of decisions reads one table: no pass over them all)
        self._sum: tuple | None = None
        self.version = 0  # steps whenever what :meth:`unseen` returns may change (what is read of it is kept by it)

    def add(self, task: str, pairs: list[tuple[str, str]], gbps: float, at: float, until: float) -> None:
        if gbps > 0 and until > at:
            new = [(task, a, b, float(gbps), at, float(until)) for a, b in pairs if a != b]
            self.entries += new
            self.version += 1
            if self._sum is not None and new:
                table, first, out = self._sum
                for _, a, b, g, _, _ in new:
                    out.add(a, b, g)
                self._sum = (table, min(first, float(until)), out)

    def others(self, task: str, total: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
        """``total`` (:meth:`unseen`'s) less what ``task`` booked itself: what a running task's move is
        costed against (its own traffic is not in its way)."""
        own = [e for e in self.entries if e[0] == task]
        if not own:
            return total
        out = dict(total)
        for _, a, b, g, _, _ in own:
            if (a, b) in out:
                out[(a, b)] = max(out[(a, b)] - g, 0.0)
        return out

    def release(self, task: str) -> None:
        """The task ended: what it booked goes."""
        if any(e[0] == task for e in self.entries):
            self.entries = [e for e in self.entries if e[0] != task]
            self._sum = None
            self.version += 1

    def unseen(self, table, now: float) -> dict[tuple[str, str], float]:
        """{(source, destination): Gbit/s} booked and not yet seen by a window of the path's (``table``:
        a path table, its latest window ends) nor ended; entries seen or ended are dropped. Read it,
        never write it."""
        if not self.entries:
            return {}
        if self._sum is not None and (self._sum[0] and self._sum[0]()) is table and now < self._sum[1]:
            return self._sum[2]  # the same windows, nothing ended: the entries added since are in it
        keep, out = [], Booked()
        for e in self.entries:
            _, src, dst, gbps, at, until = e
            if until <= now or _window_end(table, src, dst) > at:
                continue
            keep.append(e)
            out.add(src, dst, gbps)
        self.entries = keep
        # the table by weak reference: kept, it (and the inputs gathered from it) would outlive its view
        self._sum = (weakref.ref(table) if table is not None else None, min((e[5] for e in keep), default=np.inf), out)
        self.version += 1
        return out


def _window_end(table, src: str, dst: str) -> float:
    """End of the latest window of the rack-level path ``src`` -> ``dst`` (-inf: none)."""
    if table is None or table.end is None:
        return -np.inf
    towards = table.to_racks.get(src)
    code = rack_codes(table).get(dst)
    if towards is None or code is None or towards[code] < 0:
        return -np.inf
    end = float(table.end[towards[code]])
    return end if np.isfinite(end) else -np.inf


def rack_names(table) -> list[str]:
    """The rack endpoint of each rack code of ``table.node_rack`` (path_shape._racks numbers the racks
    the nodes report in sorted order), once per table."""
    hit = table._rack_rows.get("rack names")
    if hit is None:
        hit = table._rack_rows["rack names"] = sorted(set(table.rack_of.values()))
    return hit


def rack_codes(table) -> dict[str, int]:
    """{rack endpoint: its code in ``table.node_rack``}, once per table."""
    hit = table._rack_rows.get("rack codes")
    if hit is None:
        hit = table._rack_rows["rack codes"] = {name: i for i, name in enumerate(rack_names(table))}
    return hit


def left(bandwidth: np.ndarray, booked: np.ndarray) -> np.ndarray:
    """float64[...]: what is left of ``bandwidth`` with ``booked`` on it, at least HEADROOM_FLOOR of it.
    Worked: 10 Gbit/s with 4 booked -> 6; with 12 booked -> 0.5."""
    bw = np.asarray(bandwidth, np.float64)
    return np.maximum(bw - np.asarray(booked, np.float64), HEADROOM_FLOOR * bw)


def booked_between(book: dict[tuple[str, str], float], code: dict[str, int], ra, rb) -> np.ndarray:
    """float64[...] booked Gbit/s from rack code ``ra`` to rack code ``rb`` (elementwise; -1: no rack,
    nothing booked; ``code``: each rack endpoint's code, :func:`rack_codes`)."""
    ra, rb = np.asarray(ra, np.int64), np.asarray(rb, np.int64)
    out = np.zeros(ra.shape)
    keys, vals = booked_rack_pairs(book, code)
    if not keys.size:
        return out
    k = np.where((ra >= 0) & (rb >= 0), ra * len(code) + rb, -1)
    at = np.clip(np.searchsorted(keys, k), 0, keys.size - 1)
    return np.where((k >= 0) & (keys[at] == k), vals[at], 0.0)


def booked_rack_pairs(book: dict[tuple[str, str], float], code: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(int64[P] each booked rack pair's key ``code[a] x len(code) + code[b]``, ascending; float64[P] its
    rate): once per path book's sum and rack codes until the next booking (a burst's gangs read it)."""
    if isinstance(book, Booked) and book.pairs is not None and book.pairs[0] is code:
        return book.pairs[1], book.pairs[2]
    keys, vals = [], []
    for (a, b), g in book.items():
        if a in code and b in code:
            keys.append(code[a] * len(code) + code[b])
            vals.append(g)
    order = np.argsort(keys)
    keys, vals = np.asarray(keys, np.int64)[order], np.asarray(vals, np.float64)[order]
    if isinstance(book, Booked):
        book.pairs = (code, keys, vals)
    return keys, vals


def booked_from(book: dict[tuple[str, str], float], src: str, code: dict[str, int], node_rack) -> np.ndarray:
    """float64[N] booked Gbit/s from ``src`` to each node's rack (``node_rack`` int[N] codes, -1: none):
    the plain form :func:`left_from`'s compiled pass is held against in the tests."""
    per = booked_per_rack(book, src, code)
    nr = np.asarray(node_rack, np.int64)
    return per[np.where(nr >= 0, nr, len(code))]


def booked_per_rack(book: dict[tuple[str, str], float], src: str, code: dict[str, int]) -> np.ndarray:
    """float64[R + 1] booked Gbit/s from ``src`` to each rack by its code (the last: no rack, 0)."""
    per = np.zeros(len(code) + 1)
    if isinstance(book, Booked):  # the source's paths only
        for b, g in book.by_source.get(src, {}).items():
            if b in code:
                per[code[b]] += g
        return per
    for (a, b), g in book.items():
        if a == src and b in code:
            per[code[b]] += g
    return per


def left_from(bandwidth: np.ndarray, book: dict[tuple[str, str], float], src: str, table) -> np.ndarray:
    """float64[N]: ``left(bandwidth, booked_from(book, src, ...))`` — what is left of each node's path
    from ``src`` (``bandwidth`` float[N]) with what is booked on its rack's path — in one compiled pass
    (core.ect.booked_left; the tests hold the two together)."""
    return booked_left(bandwidth, booked_per_rack(book, src, rack_codes(table)), table.node_rack, HEADROOM_FLOOR)
