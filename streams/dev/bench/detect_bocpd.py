"""The third method issue 31 asked to weigh against the floor rule of core/detect.py: online Bayesian
change-point detection (Adams & MacKay 2007, "Bayesian Online Changepoint Detection") on log RTT —
run by `cnsched bench detect --cv --method bocpd` under the same leave-files-out cross-validation.

Per series, over its known windows y = log(p95 RTT) (a window without a value changes nothing), the
run length r (windows since the last change, the newest included) has a posterior updated at every
window: with hazard H = 1 / ``hazard_windows``, a run grows with probability 1 - H times the new
window's predictive under it, and a change (r = 1) takes H times the predictive of a new level. A
segment's windows are its level plus Student-t noise (``df`` degrees of freedom: RTT has heavy tails,
and one spike must not end a long run) of scale sigma = the path's relative spread (core.detect's
window_stats: 1.4826 x the median distance from the floor, over the floor; at least ``min_rel``). The
level of a run of n windows is their mean, with the predictive's scale sigma x sqrt(1 + 1/n) (known
scale, plug-in mean: a simplification that keeps it one pass); a new level is equally likely anywhere
over ``LEVEL_SPAN`` (log RTT spans 1 ms to 100 s: uniform over log(1e5)). Runs longer than
``max_run`` windows are merged into the longest kept one.

An incident starts when the posterior puts at least ``threshold`` on a change within the last ``k``
windows (r <= k) and the lowest of the last ``k`` known windows is at least ``factor`` x the floor (a
rise, not a fall or a return), and lasts ``hold`` known windows after that stops holding. The loss leg
is core.detect's, as for the floor rule and the CUSUM.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from core.detect import DetectorPolicy, window_stats
from streams.dev.bench.detect_cusum import held

LEVEL_SPAN = math.log(1e5)  # a new level's prior: uniform over log RTT from 1 ms to 100 s


@dataclass(frozen=True)
class BocpdPolicy:
    hazard_windows: float = 1000.0
    df: float = 3.0
    min_rel: float = 0.01
    max_run: int = 120
    threshold: float = 0.5
    factor: float = 1.15
    hold: int = 15
    baseline: int = 60
    floor_q: float = 0.05
    k: int = 2
    loss_windows: int = 3
    loss_min: int = 3

    @property
    def memory(self) -> int:
        """Windows it reads before an alarm: the longest run it keeps (the floor's memory is shorter)."""
        return max(self.max_run, self.baseline + self.k)

    def floor_policy(self) -> DetectorPolicy:
        """The floor rule's policy whose window_stats and loss leg this one shares."""
        return DetectorPolicy(baseline=self.baseline, floor_q=self.floor_q, k=self.k,
                              loss_windows=self.loss_windows, loss_min=self.loss_min)

    @property
    def posterior_key(self) -> tuple:
        """What the run-length posterior depends on (policies alike in it share one pass)."""
        return self.hazard_windows, self.df, self.min_rel, self.max_run, self.baseline, self.floor_q, self.k


BOCPD_GRID = {  # a first grid (df 2-30, hazard 100-1,000, factor 1.1-1.2, hold 15-30) did worse throughout
    "hazard_windows": (30.0, 100.0, 300.0),
    "df": (1.0, 2.0),
    "min_rel": (0.002, 0.005, 0.01),
    "threshold": (0.3, 0.6, 0.9),
    "factor": (1.15, 1.2),
    "hold": (30, 60),
}


def bocpd_policies(grid: dict = BOCPD_GRID) -> list[BocpdPolicy]:
    return [dataclasses.replace(BocpdPolicy(), **dict(zip(grid, v, strict=True))) for v in itertools.product(*grid.values())]


def change_probability(p95: np.ndarray, policy: BocpdPolicy, stats: tuple | None = None) -> np.ndarray:
    """float[S, T]: at every window, the posterior probability of a change within the last ``k``
    windows (module docstring); NaN at windows without a value or before the spread is known."""
    x = np.asarray(p95, np.float64)
    floor, spread = (window_stats(x, policy.floor_policy()) if stats is None else stats)[:2]
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.log(x)
        sigma = np.maximum(spread / floor, policy.min_rel)
    sigma = np.where(np.isfinite(sigma) & (floor > 0), sigma, np.nan)
    return _posterior(y, sigma, 1.0 / policy.hazard_windows, policy.df, policy.max_run, policy.k,
                      _t_constant(policy.df), -math.log(LEVEL_SPAN))


def _t_constant(df: float) -> float:
    """log of Student-t's density at its centre for unit scale: lgamma((df+1)/2) - lgamma(df/2) - log(df pi)/2."""
    return math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)


@nb.njit(cache=True)
def _posterior(y, sigma, h, df, max_run, k, t_const, new_level):  # pragma: no cover - compiled (tested against plain)
    out = np.full(y.shape, np.nan)
    log_h, log_grow = math.log(h), math.log1p(-h)
    for s in range(y.shape[0]):
        logp = np.full(max_run + 1, -np.inf)  # logp[r]: the run is r windows long (0: nothing seen yet)
        mean = np.zeros(max_run + 1)
        logp[0] = 0.0
        nxt = np.empty(max_run + 1)
        nmean = np.empty(max_run + 1)
        for t in range(y.shape[1]):
            v, sg = y[s, t], sigma[s, t]
            if not (math.isfinite(v) and math.isfinite(sg)):
                continue
            nxt[:] = -np.inf
            change = new_level + logp[0] + log_h if logp[0] > -np.inf else -np.inf
            for r in range(1, max_run + 1):
                if logp[r] == -np.inf:
                    continue
                scale = sg * math.sqrt(1.0 + 1.0 / r)
                z = (v - mean[r]) / scale
                pred = t_const - math.log(scale) - 0.5 * (df + 1.0) * math.log1p(z * z / df)
                # the change: a new level (uniform) after this run
                c = logp[r] + log_h + new_level
                change = c if change == -np.inf else max(change, c) + math.log1p(math.exp(-abs(change - c)))
                g = logp[r] + log_grow + pred
                to = min(r + 1, max_run)  # the longest run kept takes the ones beyond it
                cur = nxt[to]
                nxt[to] = g if cur == -np.inf else max(cur, g) + math.log1p(math.exp(-abs(cur - g)))
                if to == r + 1 or cur == -np.inf:
                    nmean[to] = mean[r] + (v - mean[r]) / (r + 1)
                else:  # merged: the kept run's level, weighted by the two runs' probabilities
                    w = 1.0 / (1.0 + math.exp(cur - g))
                    nmean[to] = w * (mean[r] + (v - mean[r]) / (r + 1)) + (1.0 - w) * nmean[to]
            nxt[1] = change if nxt[1] == -np.inf else max(nxt[1], change) + \
                math.log1p(math.exp(-abs(nxt[1] - change)))
            nmean[1] = v
            top = nxt.max()
            total = 0.0
            for r in range(max_run + 1):
                total += math.exp(nxt[r] - top)
            norm = top + math.log(total)
            recent = 0.0
            for r in range(max_run + 1):
                logp[r] = nxt[r] - norm
                mean[r] = nmean[r] if logp[r] > -np.inf else 0.0
                if 1 <= r <= k:
                    recent += math.exp(logp[r])
            out[s, t] = recent
    return out


def bocpd_alarms(p95: np.ndarray, policy: BocpdPolicy, stats: tuple | None = None,
                 change: np.ndarray | None = None) -> np.ndarray:
    """bool[S, T]: the incidents (module docstring) at every window of a history; ``change``: its
    :func:`change_probability` when the caller has it (policies that differ only in the thresholds)."""
    x = np.asarray(p95, np.float64)
    stats = window_stats(x, policy.floor_policy()) if stats is None else stats
    cp = change_probability(x, policy, stats) if change is None else change
    return _incidents(x, stats[0], cp, policy.threshold, policy.factor, policy.k, policy.hold)


@nb.njit(cache=True)
def _incidents(x, floor, cp, threshold, factor, k, hold):  # pragma: no cover - compiled (tested against plain)
    out = np.zeros(x.shape, np.bool_)
    for s in range(x.shape[0]):
        on, left = False, 0
        last = np.full(k, np.nan)  # the last k known windows, newest at the end
        for t in range(x.shape[1]):
            v = x[s, t]
            if math.isfinite(v):
                last[:-1] = last[1:]
                last[-1] = v
                f = floor[s, t]
                rise = math.isfinite(f) and f > 0 and not np.isnan(last[0]) and last.min() >= factor * f
                on, left = held(rise and cp[s, t] >= threshold, on, left, hold)
            out[s, t] = on
    return out
