"""The Bayesian online change points that `cnsched bench detect --cv --method bocpd` weighs against the
floor rule: the compiled run-length posterior and incidents against plain loops (shifts, spikes, gaps,
outages, constant and empty series), and worked values."""

import math

import numpy as np
import pytest

from core.detect import window_stats
from streams.dev.bench.detect_bocpd import LEVEL_SPAN, BocpdPolicy, bocpd_alarms, change_probability


def _add(a: float, b: float) -> float:
    """log(e^a + e^b)."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


def plain_posterior(x: np.ndarray, p: BocpdPolicy) -> np.ndarray:
    """The run-length posterior written out with dicts: {run length: (log probability, level)}."""
    floor, spread = window_stats(x, p.floor_policy())[:2]
    out = np.full(x.shape, np.nan)
    t_const = math.lgamma((p.df + 1) / 2) - math.lgamma(p.df / 2) - 0.5 * math.log(p.df * math.pi)
    h = 1.0 / p.hazard_windows
    for s in range(x.shape[0]):
        runs = {0: (0.0, 0.0)}
        for t in range(x.shape[1]):
            f, sp = floor[s, t], spread[s, t]
            if not (math.isfinite(x[s, t]) and math.isfinite(f) and f > 0 and math.isfinite(sp)):
                continue
            v, sg = math.log(x[s, t]), max(sp / f, p.min_rel)
            grown: dict[int, tuple[float, float]] = {}
            change = -math.inf
            for r, (lp, level) in sorted(runs.items()):
                change = _add(change, lp + math.log(h) - math.log(LEVEL_SPAN))
                if r == 0:
                    continue
                scale = sg * math.sqrt(1 + 1 / r)
                z = (v - level) / scale
                g = lp + math.log(1 - h) + t_const - math.log(scale) - (p.df + 1) / 2 * math.log(1 + z * z / p.df)
                new_level = level + (v - level) / (r + 1)
                to = min(r + 1, p.max_run)
                if to in grown:  # merged into the longest run kept: levels weighted by probability
                    cur, cur_level = grown[to]
                    w = math.exp(g) / (math.exp(g) + math.exp(cur))
                    grown[to] = (_add(cur, g), w * new_level + (1 - w) * cur_level)
                else:
                    grown[to] = (g, new_level)
            grown[1] = (_add(grown[1][0], change) if 1 in grown else change, v)
            norm = -math.inf
            for lp, _ in grown.values():
                norm = _add(norm, lp)
            runs = {r: (lp - norm, level) for r, (lp, level) in grown.items()}
            out[s, t] = sum(math.exp(lp) for r, (lp, _) in runs.items() if 1 <= r <= p.k)
    return out


def plain_incidents(x: np.ndarray, p: BocpdPolicy) -> np.ndarray:
    floor = window_stats(x, p.floor_policy())[0]
    cp = plain_posterior(x, p)
    out = np.zeros(x.shape, bool)
    for s in range(x.shape[0]):
        on, left, last = False, 0, []
        for t in range(x.shape[1]):
            if math.isfinite(x[s, t]):
                last = (last + [x[s, t]])[-p.k:]
                f = floor[s, t]
                rise = math.isfinite(f) and f > 0 and len(last) == p.k and min(last) >= p.factor * f
                if rise and cp[s, t] >= p.threshold:
                    on, left = True, p.hold
                elif on and left > 0:
                    left -= 1
                elif on:
                    on = False
            out[s, t] = on
    return out


def _series() -> np.ndarray:
    rng = np.random.default_rng(5)
    x = 100 * np.exp(rng.normal(0, 0.01, (6, 300)))
    x[0, 200:] *= 1.3  # a sustained rise
    x[1, [150, 160, 250]] = 900.0  # single spikes
    x[2, 100:140] = np.nan  # an outage
    x[2, 220:] *= 1.1
    x[3] = 50.0  # constant
    x[4] = np.nan  # nothing known
    x[5, ::7] = np.nan  # gaps throughout, and a rise
    x[5, 230:] *= 1.5
    return x


@pytest.mark.parametrize("p", [BocpdPolicy(baseline=30), BocpdPolicy(baseline=30, df=30.0, hazard_windows=100.0,
                                                                      max_run=20, min_rel=0.005, k=3, hold=0)])
def test_the_compiled_posterior_and_incidents_equal_plain_loops(p):
    x = _series()
    got, want = change_probability(x, p), plain_posterior(x, p)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-9, atol=1e-12)
    assert np.array_equal(bocpd_alarms(x, p), plain_incidents(x, p))


def test_a_sustained_rise_is_caught_where_one_spike_and_a_constant_path_are_not():
    x, p = _series(), BocpdPolicy(baseline=30)
    got = bocpd_alarms(x, p)
    assert got[0, 201] and not got[0, :200].any()  # the rise: at its second window
    assert not got[1].any()  # single spikes: the lowest of the last two windows is back at the floor
    assert not got[3].any() and not got[4].any()  # constant; empty
    cp = change_probability(x, p)
    assert cp[0, 201] > 0.95 and cp[0, 199] < 0.01  # the posterior itself sees the change
    assert np.isnan(cp[4]).all()


def test_worked_posterior_same_level_then_double():
    # k = 1, baseline 1: the floor at window t is window t-1, its spread 0, so sigma = min_rel = 0.01;
    # window 1 is the first one read: a run of one, certainly
    p = BocpdPolicy(baseline=1, k=1, hazard_windows=100.0, df=3.0, min_rel=0.01, max_run=10)
    x = np.array([[100.0, 100.0, 100.0, 200.0]])
    cp = change_probability(x, p)
    assert math.isnan(cp[0, 0]) and cp[0, 1] == pytest.approx(1.0)
    t_const = math.lgamma(2) - math.lgamma(1.5) - 0.5 * math.log(3 * math.pi)  # -1.00087
    new = math.log(0.01) - math.log(LEVEL_SPAN)  # a change to a new level: -7.0487
    # window 2, same level: the run grows with density t(0) at scale 0.01 sqrt 2 (log 3.2477), or
    # changes (log -7.0487): P(r = 1) = 1 / (1 + e^10.296) = 3.4e-5
    grow = math.log(0.99) + t_const - math.log(0.01 * math.sqrt(2))
    p1 = 1 / (1 + math.exp(grow - new))
    assert cp[0, 2] == pytest.approx(p1, rel=1e-9) and cp[0, 2] == pytest.approx(3.37e-5, rel=1e-2)
    # window 3 doubles: z = ln 2 / scale; the run of 2 grows at scale 0.01 sqrt 1.5 (log density
    # -10.55), the run of 1 at 0.01 sqrt 2 (-10.12), a change -7.05 (either run may end): P(r = 1) = 0.971
    def t_log(z_scale):
        z = math.log(2) / z_scale
        return t_const - math.log(z_scale) - 2 * math.log1p(z * z / 3)
    g1 = math.log(p1) + math.log(0.99) + t_log(0.01 * math.sqrt(2))
    g2 = math.log(1 - p1) + math.log(0.99) + t_log(0.01 * math.sqrt(1.5))
    want = math.exp(new) / (math.exp(new) + math.exp(g1) + math.exp(g2))
    assert cp[0, 3] == pytest.approx(want, rel=1e-9) and cp[0, 3] == pytest.approx(0.971, abs=1e-3)
