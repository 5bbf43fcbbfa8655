"""A pane (one sketch of one series over gcd(size, step) seconds) and a partition's progress mark,
and their wire format in the ingest table's changelog.

pane:  version u8 | applied_offset i64 | count i64 | lost i64 | vmin f64 | vmax f64 | n u32
       | keys i16[n] | counts i64[n] | sums f64[n]          (45 + 18 n bytes)
mark:  version u8 | applied_offset i64 | max_ts f64 | closed_before f64
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Pane:
    applied_offset: int = -1
    count: int = 0
    lost: int = 0
    vmin: float = math.inf
    vmax: float = -math.inf
    # bucket chunks (key, count, sum), consolidated lazily
    keys: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    sums: list[np.ndarray] = field(default_factory=list)


@dataclass
class PartitionMark:
    """Progress of one source partition: persisted beside its panes."""

    applied_offset: int = -1
    max_ts: float = -math.inf
    closed_before: float = -math.inf  # every window ending at or before this was emitted


_PANE_HEAD = struct.Struct("<BqqqddI")
_MARK = struct.Struct("<Bqdd")
_VERSION = 1


def encode_pane(p: Pane) -> bytes:
    k = p.keys[0] if p.keys else np.zeros(0, np.int32)
    c = p.counts[0] if p.counts else np.zeros(0, np.int64)
    s = p.sums[0] if p.sums else np.zeros(0, np.float64)
    head = _PANE_HEAD.pack(_VERSION, p.applied_offset, p.count, p.lost, p.vmin, p.vmax, k.size)
    return b"".join((head, k.astype("<i2").tobytes(), c.astype("<i8").tobytes(), s.astype("<f8").tobytes()))


def decode_pane(data: bytes) -> Pane:
    version, off, count, lost, vmin, vmax, n = _PANE_HEAD.unpack_from(data)
    if version != _VERSION:
        raise ValueError(f"unknown pane format version {version}")
    pos = _PANE_HEAD.size
    k = np.frombuffer(data, "<i2", n, pos).astype(np.int32)
    pos += 2 * n
    c = np.frombuffer(data, "<i8", n, pos).astype(np.int64)
    pos += 8 * n
    s = np.frombuffer(data, "<f8", n, pos).astype(np.float64)
    return Pane(off, count, lost, vmin, vmax, [k], [c], [s])


def encode_mark(m: PartitionMark) -> bytes:
    return _MARK.pack(_VERSION, m.applied_offset, m.max_ts, m.closed_before)


def decode_mark(data: bytes) -> PartitionMark:
    version, off, max_ts, closed = _MARK.unpack(data)
    if version != _VERSION:
        raise ValueError(f"unknown mark format version {version}")
    return PartitionMark(off, max_ts, closed)


# the ingest table's keys: P|<partition>|<src>\x1f<dst>\x1f<metric>\x1f<pane> and M|<partition>
_SEP = "\x1f"


def pane_table_key(partition: int, k: tuple[str, str, str, int]) -> bytes:
    src, dst, metric, pane = k
    return f"P|{partition}|{src}{_SEP}{dst}{_SEP}{metric}{_SEP}{pane}".encode()


def parse_pane_table_key(key: bytes) -> tuple[int, tuple[str, str, str, int]]:
    _, partition, rest = key.decode().split("|", 2)
    src, dst, metric, pane = rest.split(_SEP)
    return int(partition), (src, dst, metric, int(pane))


def mark_table_key(partition: int) -> bytes:
    return f"M|{partition}".encode()
