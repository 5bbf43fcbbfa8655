"""`cnsched bench detect`: the degradation detector (core/detect.py) beside the median rule it replaced
and the seeds' "latency doubles" rule, on labelled RTT series (`../shared/data/rtt/real_labelled`:
real RIPE Atlas traces labelled by hand; `artificial_labelled`: built to resemble them; one window per
4-minute sample). Each rule runs whole: its latency leg on the RTT, its loss leg on the failed pings
(a NaN sample is one lost probe of one) — an outage right after a change point is caught by loss.

Events: the labelled change points where the level (median of the samples up to the next change
point, at least two windows later: sustained) rises to at least ``min_ratio`` x the level before
(median since the previous one). Caught: an alarm at the change point's window or the next (within
two windows), or within an hour. Delay: windows from the change point to the first alarm (caught
within the hour). Two guards against a detector that catches by being on: the share of windows in an
incident, and the events whose window before was in an incident already (caught with delay 0 — fair
for a rise within an episode already paged, a cheat when the detector is on much of the time: a CUSUM
with a small allowance was on 24 % of the time and "caught" 20 of 28 rises that way). False alarms, counted per path-day, two ways:
- bench: an alarm that starts (its window alarms, the one before did not) with no labelled change
  point (of any size or direction: a smaller real change is no false alarm) in the detector's memory
  before it (its baseline and recent windows);
- strict: an alarm that starts at least two hours away from every labelled change point, either
  side — as an operator counts a page.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from core.detect import DEFAULT_POLICY, SEED_RULE, DetectorPolicy, alarms, loss_alarms
from streams.analytics.rtt_series import rises
from streams.dev.bench.forecast import DEFAULT_RTT_DIR

# the rule before issue 31: the median of 15 windows, both recent ones 1.15 x it and 8 sigmas above
MEDIAN_RULE = DetectorPolicy(factor=1.15, sustain=1.15, k=2, baseline=15, floor_q=0.5, min_sigmas=8.0,
                             release=math.inf, hold=0, loss_windows=2, loss_min=1)
STRICT_S = 7200.0  # a strict false alarm starts this far from every labelled change


@dataclass
class Tally:
    """What one rule did on some series (sums: they add over files)."""

    events: int = 0
    caught: int = 0  # within two windows
    caught_hour: int = 0
    false_bench: int = 0
    false_strict: int = 0
    days: float = 0.0
    delays: list = field(default_factory=list)  # windows, of the events caught within the hour
    already_on: int = 0  # events whose window before was in an incident already (caught at delay 0)
    caught_fresh: int = 0  # events caught within two windows whose window before was in no incident
    alarm_windows: int = 0  # windows in an incident
    windows: int = 0

    def add(self, other: Tally) -> None:
        for f in ("events", "caught", "caught_hour", "false_bench", "false_strict", "days", "already_on", "caught_fresh",
                  "alarm_windows", "windows"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.delays += other.delays

    def summary(self, step_s: float) -> dict:
        d = np.asarray(self.delays, float) * step_s / 60
        return {"events": self.events, "recall_2_windows": _share(self.caught, self.events),
                "recall_1_hour": _share(self.caught_hour, self.events),
                "false_alarms_per_path_day": self.false_bench / self.days if self.days else None,
                "strict_false_alarms_per_path_day": self.false_strict / self.days if self.days else None,
                "delay_median_min": float(np.median(d)) if d.size else None,
                "delay_p90_min": float(np.percentile(d, 90)) if d.size else None,
                "events_already_in_an_incident": self.already_on,
                "recall_2_windows_from_quiet": _share(self.caught_fresh, self.events - self.already_on),
                "alarm_time_share": self.alarm_windows / self.windows if self.windows else None}


def _share(a: int, b: int) -> float | None:
    return a / b if b else None


def score(alarm: np.ndarray, events: list[int], changes: np.ndarray, memory: int, step_s: float) -> Tally:
    """How ``alarm`` (bool[T]) did on one series (module docstring)."""
    hour = max(int(round(3600 / step_s)), 2)
    starts = np.flatnonzero(alarm & ~np.r_[False, alarm[:-1]])
    cps = np.flatnonzero(changes)
    near = STRICT_S / step_s
    t = Tally(events=len(events), days=alarm.size * step_s / 86400, alarm_windows=int(alarm.sum()),
              windows=alarm.size)
    for e in events:
        on = bool(e > 0 and alarm[e - 1])
        t.already_on += on
        hit = np.flatnonzero(alarm[e:e + hour])
        t.caught += bool(hit.size and hit[0] < 2)
        t.caught_fresh += bool(hit.size and hit[0] < 2 and not on)
        t.caught_hour += bool(hit.size)
        if hit.size:
            t.delays.append(int(hit[0]))
    t.false_bench = sum(1 for s in starts if not ((cps <= s) & (cps > s - memory)).any())
    t.false_strict = sum(1 for s in starts if not (np.abs(cps - s) < near).any())
    return t


def detect(rtt: np.ndarray, policy: DetectorPolicy, stats: tuple | None = None,
           loss: np.ndarray | None = None) -> np.ndarray:
    """bool[T]: the latency or the loss leg of ``policy`` at every window of one series. ``stats``
    (core.detect.window_stats) and ``loss`` (the loss leg's alarms) when the caller has them already
    (a grid of policies that share them: streams/dev/bench/detect_cv.py)."""
    if loss is None:
        lost = (~np.isfinite(rtt)).astype(np.float64)[None]
        loss = loss_alarms(lost, np.ones_like(lost), policy)[0]
    return alarms(rtt[None], policy, stats)[0] | loss


def run_rule(series, policy: DetectorPolicy, min_ratio: float) -> tuple[Tally, list[tuple[str, Tally]], float]:
    """(the rule's tally over ``series``, per file, seconds spent detecting)."""
    total, per, seconds = Tally(), [], 0.0
    for s in series:
        t0 = time.perf_counter()
        a = detect(s.rtt, policy)
        seconds += time.perf_counter() - t0
        t = score(a, rises(s.rtt, s.change, min_ratio), s.change, policy.memory, s.step_s)
        total.add(t)
        per.append((s.name, t))
    return total, per, seconds


def live_ms(policy: DetectorPolicy, paths: int = 10_000, repeat: int = 5) -> float:
    """Milliseconds of one live decision (core.detect.ratio_now on every path's memory, as the
    scheduler's path table asks it after each window), best of ``repeat``."""
    from core.detect import ratio_now

    rng = np.random.default_rng(0)
    hist = (50 + rng.gamma(2.0, 1.0, (paths, policy.memory))).astype(np.float32)
    hist[rng.random(hist.shape) < 0.01] = np.nan
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        ratio_now(hist, policy)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


RULES = {"ours": DEFAULT_POLICY, "median": MEDIAN_RULE, "doubles": SEED_RULE}


def bench_detect(rtt_dir: str = DEFAULT_RTT_DIR, min_ratio: float = 1.2, per_file: bool = False) -> dict:
    from streams.analytics.rtt_series import load_dir

    series = load_dir(rtt_dir)
    step = series[0].step_s if series else 240.0
    out: dict = {"series": len(series), "path_days": round(sum(s.rtt.size for s in series) * step / 86400, 1),
                 "min_ratio": min_ratio}
    for name, policy in RULES.items():
        total, per, seconds = run_rule(series, policy, min_ratio)
        out[name] = total.summary(step) | {"seconds": seconds}
        if per_file and name == "ours":
            out["files"] = {f: t.summary(step) for f, t in per}
    out["live_ms_per_10k_paths"] = {name: live_ms(policy) for name, policy in RULES.items()}
    base = out["median"]
    for key in ("recall_2_windows", "strict_false_alarms_per_path_day"):
        if base[key]:
            out[f"ours_vs_median_{key}"] = out["ours"][key] / base[key]
    return out
