"""`cnsched bench detect`: the degradation detector (core/detect.py) beside the seeds' "latency
doubles" rule on labelled RTT series (`../shared/data/rtt/artificial_labelled`, one window per
4-minute sample). Each rule runs whole: its latency leg on the RTT, its loss leg on the failed pings
(a NaN sample is one lost probe of one) — an outage right after a change point is caught by loss.

Events: the labelled change points where the level (median of the samples up to the next change
point, at least two windows later: sustained) rises to at least ``min_ratio`` x the level before
(median since the previous one). Caught: an alarm at the change point's window or the next (within
two windows). False alarm: an alarm that starts (its window alarms, the one before did not) with no
labelled change point (of any size or direction: a smaller real change is no false alarm) in the
detector's memory before it (its baseline and recent windows), counted per path-day.
"""

from __future__ import annotations

import time

import numpy as np

from core.detect import SEED_RULE, DetectorPolicy, alarms, loss_alarms
from streams.dev.bench.forecast import DEFAULT_RTT_DIR


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


def score(alarm: np.ndarray, events: list[int], changes: np.ndarray, memory: int, within: int = 2) -> tuple[int, int]:
    """(events caught within ``within`` windows, alarm starts with no change point in ``memory``)."""
    caught = sum(bool(alarm[e:e + within].any()) for e in events)
    starts = np.flatnonzero(alarm & ~np.r_[False, alarm[:-1]])
    cps = np.flatnonzero(changes)
    false = sum(1 for s in starts if not ((cps <= s) & (cps > s - memory)).any())
    return caught, false


def detect(rtt: np.ndarray, policy: DetectorPolicy) -> np.ndarray:
    """bool[T]: the latency or the loss leg of ``policy`` at every window of one series."""
    lost = (~np.isfinite(rtt)).astype(np.float64)[None]
    return alarms(rtt[None], policy)[0] | loss_alarms(lost, np.ones_like(lost), policy)[0]


def bench_detect(rtt_dir: str = DEFAULT_RTT_DIR, min_ratio: float = 1.2) -> dict:
    from streams.analytics.rtt_series import load_dir

    series = load_dir(rtt_dir)
    policies = {"ours": DetectorPolicy(), "doubles": SEED_RULE}
    tally = {name: [0, 0] for name in policies}
    events = days = 0
    seconds = dict.fromkeys(policies, 0.0)
    for s in series:
        ev = rises(s.rtt, s.change, min_ratio)
        events += len(ev)
        days += s.rtt.size * s.step_s / 86400
        for name, pol in policies.items():
            t0 = time.perf_counter()
            a = detect(s.rtt, pol)
            seconds[name] += time.perf_counter() - t0
            c, f = score(a, ev, s.change, pol.baseline + pol.k)
            tally[name][0] += c
            tally[name][1] += f
    out = {"series": len(series), "path_days": round(days, 1), "rises": events, "min_ratio": min_ratio}
    for name, (c, f) in tally.items():
        out[f"{name}_recall"] = c / events if events else None
        out[f"{name}_false_alarms_per_path_day"] = f / days
        out[f"{name}_seconds"] = seconds[name]
    return out
