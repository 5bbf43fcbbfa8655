"""The CUSUM that `cnsched bench detect --cv --method cusum` weighs against the floor rule: its compiled
loop against a plain one, and a worked example."""

import math

import numpy as np

from core.detect import window_stats
from streams.dev.bench.detect_cusum import CusumPolicy, cusum_alarms


def plain(x: np.ndarray, p: CusumPolicy) -> np.ndarray:
    floor, spread = window_stats(x, p.floor_policy())[:2]
    out = np.zeros(x.shape, bool)
    for s in range(x.shape[0]):
        acc, on, left = 0.0, False, 0
        for t in range(x.shape[1]):
            f = floor[s, t]
            if math.isfinite(x[s, t]) and math.isfinite(f) and f > 0:
                z = math.log(x[s, t] / f) / max(spread[s, t] / f, p.min_rel)
                acc = max(0.0, acc + min(z - p.drift, p.cap))
                if acc >= p.h:
                    on, left = True, p.hold
                elif on and left > 0:
                    left -= 1
                elif on:
                    on = False
            out[s, t] = on
    return out


def test_the_compiled_cusum_equals_a_plain_loop_on_shifts_spikes_gaps_and_outages():
    rng = np.random.default_rng(3)
    x = 100 + rng.normal(0, 0.5, (6, 400))
    x[0, 200:260] *= 1.3  # a sustained rise
    x[1, [150, 160, 300]] = 900.0  # single spikes (two in a row would be two windows up)
    x[2, 100:140] = np.nan  # an outage
    x[2, 250:] *= 1.1
    x[3] = 50.0  # constant
    x[4] = np.nan  # nothing known
    x[5, ::7] = np.nan  # gaps throughout, and a rise
    x[5, 300:] *= 1.5
    for p in (CusumPolicy(), CusumPolicy(drift=2.0, h=80.0, cap=40.0, min_rel=0.005, hold=0),
              CusumPolicy(baseline=20, h=10.0, cap=5.0)):
        assert np.array_equal(cusum_alarms(x, p), plain(x, p))
    got = cusum_alarms(x, CusumPolicy())
    assert got[0, 201] and not got[0, :200].any()  # the rise: caught at its second window
    assert not got[1].any() and not got[3].any() and not got[4].any()  # spikes capped; constant; empty


def test_worked_example_one_capped_spike_is_no_incident_and_two_rises_are():
    # floor 100, spread 0 -> read as min_rel 1 % noisy; a window at 130: z = ln 1.3 / 0.01 = 26.2,
    # counted min(26.2 - 5, 25) = 21.2; h = 40: one such window is not enough, two are (42.5)
    p = CusumPolicy(drift=5.0, h=40.0, cap=25.0, min_rel=0.01, hold=0, baseline=10)
    x = np.full((1, 40), 100.0)
    x[0, 20] = 130.0  # one window up, then back: S = 21.2, then 21.2 - 5 = 16.2 ... falls to 0
    assert not cusum_alarms(x, p).any()
    x[0, 30:32] = 130.0
    got = cusum_alarms(x, p)[0]
    assert np.flatnonzero(got).tolist() == [31]  # on at the second window only (hold 0, S falls below h after)
    x[0, 20] = 10_000.0  # a spike counts one cap (25), not 459: still no incident alone
    assert cusum_alarms(x, p)[0, :30].sum() == 0
