"""Labelled RTT series (WenqinSHAO/rtt's artificial traces, `../shared/data/rtt/artificial_labelled`):
``epoch;rtt;cp`` with a header; ``epoch`` ``YYYY-MM-DD HH:MM:SS`` or ``DD/MM/YYYY HH:MM`` (UTC); ``rtt``
in ms with a decimal comma; ``cp`` 1 where a change point was placed. An empty or non-positive RTT is
a failed ping (NaN). Samples land on a grid of ``step_s`` seconds from the first one."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

import numpy as np

STEP_S = 240.0
_FORMATS = ("%Y-%m-%d %H:%M:%S", "%d/%m/%Y %H:%M")


def rises(rtt: np.ndarray, change: np.ndarray, min_ratio: float) -> list[int]:
    """The change points whose new level lasts two windows or more and is at least ``min_ratio`` x
    the old one."""
    cps = np.flatnonzero(change)
    bounds = np.r_[0, cps, rtt.size]
    out = []
    for i, c in enumerate(cps):
        before, after = rtt[bounds[i]:c], rtt[c:bounds[i + 2]]
        if after.size >= 2 and np.isfinite(before).any() and np.isfinite(after).any() and \
                np.nanmedian(after) >= min_ratio * np.nanmedian(before):
            out.append(int(c))
    return out


class SeriesError(ValueError):
    """A file that is not a labelled RTT series; the message names the file and line."""


@dataclass
class LabelledSeries:
    name: str
    start: float  # epoch seconds of the first grid step
    step_s: float
    rtt: np.ndarray  # float64[T] NaN: failed ping or no sample
    change: np.ndarray  # bool[T] a change point was placed at this step


def _epoch(text: str) -> float:
    """Seconds since 1970 (UTC). The day is parsed once per date (files hold thousands of samples a
    day) and the clock by hand; anything that is not plainly ``HH:MM[:SS]`` goes the slow way, so the
    errors are strptime's own."""
    date, _, clock = text.partition(" ")
    day = _day(date)
    parts = clock.split(":")
    if day is not None and len(parts) == day[1] and all(len(p) == 2 and p.isdigit() for p in parts):
        h, m, sec = int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 0
        if h < 24 and m < 60 and sec < 60:
            return day[0] + h * 3600.0 + m * 60.0 + sec
    return _slow_epoch(text)


@lru_cache(maxsize=4096)
def _day(date: str) -> tuple[float, int] | None:
    """(midnight of ``date`` in epoch seconds, the clock fields its format carries), None if neither."""
    for fmt, fields in (("%Y-%m-%d", 3), ("%d/%m/%Y", 2)):
        try:
            return datetime.strptime(date, fmt).replace(tzinfo=timezone.utc).timestamp(), fields
        except ValueError:
            pass
    return None


def _slow_epoch(text: str) -> float:
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    raise ValueError(f"epoch {text!r} is neither YYYY-MM-DD HH:MM:SS nor DD/MM/YYYY HH:MM")


def _regular(lines: list[str]) -> tuple[np.ndarray, np.ndarray, list[bool]] | None:
    """(epochs, RTTs with failed pings as given, change flags) of the sample lines at once when every
    one is plainly ``DD/MM/YYYY HH:MM;…`` or ``YYYY-MM-DD HH:MM:SS;…`` with a number or nothing as its
    RTT (numpy parses them all in one call); None otherwise (:func:`load_labelled` then reads line by
    line, and says where a line is wrong)."""
    parts = [line.split(";", 3) for line in lines]
    if any(len(f) < 3 for f in parts):
        return None
    iso = [f"{e[6:10]}-{e[3:5]}-{e[:2]}T{e[11:]}" if len(e) == 16 and e[2] == "/" and e[13] == ":"
           else e.replace(" ", "T") if len(e) == 19 and e[4] == "-" and e[10] == " " else "?" for e, *_ in parts]
    try:
        ts = np.array(iso, "datetime64[s]").astype(np.int64).astype(np.float64)
        rtt = np.array([f[1].replace(",", ".") or "nan" for f in parts]).astype(np.float64)
    except ValueError:
        return None
    return ts, rtt, [f[2].strip().startswith("1") for f in parts]


def load_labelled(path: str, step_s: float = STEP_S) -> LabelledSeries:
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    regular = _regular([x for x in lines[1:] if not x.startswith("epoch;")])  # headers (some files repeat it)
    if regular is not None and regular[0].size:
        t, v, cp = regular
        return _on_grid(path, t, np.where(v > 0, v, np.nan), cp, step_s)
    return _line_by_line(path, step_s)


def _line_by_line(path: str, step_s: float) -> LabelledSeries:
    ts, rtt, cp = [], [], []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            f = line.rstrip("\n").split(";")
            if n == 1 or f[0] == "epoch":  # the header (some files repeat it)
                continue
            if len(f) < 3:
                raise SeriesError(f"{path}:{n}: expected epoch;rtt;cp, got {line.strip()!r}")
            try:
                ts.append(_epoch(f[0]))
                v = float(f[1].replace(",", ".")) if f[1] else np.nan
            except ValueError as exc:
                raise SeriesError(f"{path}:{n}: {exc}") from None
            rtt.append(v if v > 0 else np.nan)
            cp.append(f[2].strip().startswith("1"))
    if not ts:
        raise SeriesError(f"{path}: no samples")
    return _on_grid(path, np.array(ts), np.array(rtt), cp, step_s)


def _on_grid(path: str, t: np.ndarray, rtt: np.ndarray, cp, step_s: float) -> LabelledSeries:
    idx = np.round((t - t.min()) / step_s).astype(np.int64)
    values = np.full(int(idx.max()) + 1, np.nan)
    change = np.zeros(values.size, bool)
    values[idx] = rtt
    change[idx] = cp
    return LabelledSeries(os.path.basename(path), float(t.min()), step_s, values, change)


def load_dir(directory: str, step_s: float = STEP_S) -> list[LabelledSeries]:
    """Every ``*.csv`` of a directory, by name."""
    files = sorted(glob.glob(os.path.join(directory, "*.csv")), key=lambda p: (len(p), p))
    if not files:
        raise SeriesError(f"{directory}: no *.csv files")
    return [load_labelled(p, step_s) for p in files]
