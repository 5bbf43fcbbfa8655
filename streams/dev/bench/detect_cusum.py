"""The method issue 31 asked to weigh against the floor rule of core/detect.py: a one-sided CUSUM
(Page 1954) on log RTT against the same floor, with a robust scale — run by `cnsched bench detect
--cv --method cusum` under the same leave-files-out cross-validation, so the two are chosen between on
held-out files, not on the whole set.

Per window t of a series (p95 RTT; NaN = no window), with the floor and spread of core.detect's
window_stats (the ``floor_q`` quantile of the ``baseline`` known windows before the last ``k``, and
1.4826 x the median distance from it):
- z = log(x / floor) / max(spread / floor, ``min_rel``): how many relative spreads the window is above
  the floor (``min_rel``: a path quieter than that is read as that noisy — 0.5 ms on a 70 ms path is
  not a rise);
- S = max(0, S_prev + min(z - ``drift``, ``cap``)): the sum of what windows exceed the allowance
  ``drift`` by, each counted at most ``cap`` (one huge spike is one ``cap``, not an incident);
- an incident while S >= ``h``, and ``hold`` known windows more. A window without a value keeps S.
The loss leg is core.detect's, as for the floor rule.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numba as nb
import numpy as np

from core.detect import DetectorPolicy, window_stats


@dataclass(frozen=True)
class CusumPolicy:
    drift: float = 5.0
    h: float = 40.0
    cap: float = 25.0
    min_rel: float = 0.01
    hold: int = 15
    baseline: int = 60
    floor_q: float = 0.05
    k: int = 2  # the floor is read before the last k windows, as the floor rule's
    loss_windows: int = 3
    loss_min: int = 3

    @property
    def memory(self) -> int:
        return self.baseline + self.k

    def floor_policy(self) -> DetectorPolicy:
        """The floor rule's policy whose window_stats and loss leg this one shares."""
        return DetectorPolicy(baseline=self.baseline, floor_q=self.floor_q, k=self.k,
                              loss_windows=self.loss_windows, loss_min=self.loss_min)


CUSUM_GRID = {
    "drift": (2.0, 5.0, 10.0, 20.0),
    "h": (20.0, 40.0, 80.0, 160.0),
    "cap": (10.0, 20.0, 40.0, 80.0),
    "min_rel": (0.005, 0.01, 0.02),
    "hold": (15,),
    "baseline": (60, 120),
    "loss_min": (3,),
}


def cusum_policies(grid: dict = CUSUM_GRID) -> list[CusumPolicy]:
    return [dataclasses.replace(CusumPolicy(), **dict(zip(grid, v, strict=True))) for v in itertools.product(*grid.values())]


def cusum_alarms(p95: np.ndarray, policy: CusumPolicy, stats: tuple | None = None) -> np.ndarray:
    """bool[S, T]: the CUSUM's incidents (module docstring) at every window of a history."""
    x = np.asarray(p95, np.float64)
    floor, spread = (window_stats(x, policy.floor_policy()) if stats is None else stats)[:2]
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.maximum(spread / floor, policy.min_rel)
        z = np.log(x / floor) / rel
    z = np.where(np.isfinite(z) & (floor > 0), z, np.nan)
    return _cusum(z, policy.drift, policy.h, policy.cap, policy.hold)


@nb.njit(cache=True)
def _cusum(z, drift, h, cap, hold):  # pragma: no cover - compiled (tested against a plain loop)
    out = np.zeros(z.shape, np.bool_)
    for s in range(z.shape[0]):
        acc, on, left = 0.0, False, 0
        for t in range(z.shape[1]):
            if not np.isnan(z[s, t]):
                acc = max(0.0, acc + min(z[s, t] - drift, cap))
                on, left = held(acc >= h, on, left, hold)
            out[s, t] = on
    return out


@nb.njit(cache=True)
def held(hit, on, left, hold):  # pragma: no cover - compiled (tested through its callers' plain loops)
    """(on, left) after a known window: on with ``hold`` windows left where the rule hits; else one
    window less left, and off once none is."""
    if hit:
        return True, hold
    if on and left > 0:
        return True, left - 1
    return False, left
