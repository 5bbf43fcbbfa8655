"""The degradation detector (core/detect.py): worked examples, silence on noise and spikes, the loss
leg's binomial bound, and the vectorised incidents against a plain window-by-window reference."""

import dataclasses
import math

import numpy as np
import pytest

from core.detect import (
    DEFAULT_POLICY,
    SEED_RULE,
    DetectorPolicy,
    alarms,
    loss_alarm,
    loss_alarms,
    ratio_now,
)


def flat(n, level=50.0, sd=0.05, seed=0):
    # sd 0.05: a spread (1.4826 x the median distance from the 5 % floor) of about 0.12, so the
    # default's 30 spreads are about 3.6 ms (7 %) — below the rises planted here
    return level + np.random.default_rng(seed).normal(0, sd, n)


def starts(a):
    return np.flatnonzero(a & ~np.r_[False, a[:-1]])


def test_a_sustained_shift_is_caught_at_its_second_window():
    y = flat(200)
    y[150:] *= 1.25  # a reroute: +25 %
    a = alarms(y[None])[0]
    assert not a[:151].any() and a[151:].all()  # window 150 alone could be a spike; 150 and 151 together are not
    # the seeds' rule misses it (not doubled)
    assert not alarms(y[None], SEED_RULE)[0].any()
    # live (the newest window only, what rescheduling reads): the shift shows at the second window too
    assert ratio_now(y[None, :152])[0] >= DEFAULT_POLICY.sustain and ratio_now(y[None, :151])[0] == 0.0


def test_the_floor_survives_an_earlier_episode():
    # congestion (+30 % for 10 windows) that ended four windows ago left the median baseline high; the
    # floor is not
    y = flat(300)
    y[150:160] *= 1.3
    y[164:] *= 1.3
    assert starts(alarms(y[None], DetectorPolicy(hold=0))[0]).tolist() == [151, 165]
    assert alarms(y[None])[0][165]  # (held: still the first incident)
    # the rule it replaced (median of the 15 windows before) does not see the second one as a rise
    median = DetectorPolicy(factor=1.15, sustain=1.15, baseline=15, floor_q=0.5, min_sigmas=8.0,
                            release=np.inf, hold=0)
    assert not alarms(y[None], median)[0][164:170].any()


def test_an_episode_that_dips_is_one_incident_until_it_ends():
    y = flat(400)
    y[150:190] *= 1.3
    y[160] = y[170] = 50.0  # two windows back at the floor inside the episode
    a = alarms(y[None])[0]
    assert starts(a).tolist() == [151]
    h = DEFAULT_POLICY.hold  # 30
    assert a[151:190].all() and a[190 + h - 1] and not a[190 + h:].any()  # held 30 windows after it ends
    no_hold = alarms(y[None], DetectorPolicy(hold=0))[0]
    # without the hold each dip ends it, and two high windows after it start another
    assert starts(no_hold).tolist() == [151, 162, 172]


def test_spikes_and_noise_stay_silent():
    y = flat(5000, sd=0.5, seed=1)
    y[1000] *= 10  # a lone spike
    y[np.random.default_rng(2).random(y.size) < 0.02] *= 4  # 2 % spikes
    y[np.random.default_rng(3).random(y.size) < 0.05] = np.nan  # gaps
    a = alarms(y[None])[0]
    # only two spikes in a row can look like a rise: a handful in 5,000 windows
    assert len(starts(a)) <= 5 and not a[1000]
    assert alarms(np.full((1, 200), 7.0))[0].sum() == 0  # constant: no spread, no change


def test_the_floor_follows_a_new_regime():
    y = flat(600)
    y[200:] *= 1.5
    a = alarms(y[None])[0]
    # once the new level fills all but 5 % of the baseline (58 of its 60 windows) it is the floor, and
    # the incident ends 30 windows (the hold) later
    end, h = int(np.flatnonzero(a)[-1]), DEFAULT_POLICY.hold
    assert a[201:end + 1].all() and 200 + 56 + h <= end <= 200 + 62 + h + 1 and len(starts(a)) == 1


def test_loss_leg_needs_enough_probes_and_a_loss_clearly_above_the_paths_own():
    # 3 lost of 100 probes at the path's usual 0.1 %: KL(0.03 || 0.001) = 0.03 ln 30 + 0.97 ln(0.97/0.999)
    # = 0.10204 - 0.02859 = 0.07345 -> tail bound exp(-100 x 0.07345) = 6.5e-4 < 1e-3: an alarm
    q, p0 = 0.03, 0.001
    kl = q * math.log(q / p0) + (1 - q) * math.log((1 - q) / (1 - p0))
    assert math.exp(-100 * kl) == pytest.approx(6.5e-4, rel=0.02)
    got = loss_alarm(np.array([3, 1, 3, 30]), np.array([100, 50, 100, 1000]), np.array([1, 1, 40, 0]),
                     np.array([1000, 1000, 1000, 0]))
    # 1 of 50: too few probes; 3 of 100 on a path that always loses 4 %: its normal; 30 of 1,000: alarm
    assert got.tolist() == [True, False, False, True]
    assert loss_alarm(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2)).tolist() == [False, False]


def test_loss_alarms_over_a_history_match_the_one_window_call():
    p = DetectorPolicy(k=2, baseline=4, loss_windows=2, loss_min=2)
    lost = np.array([[0, 0, 0, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 1, 0]], float)
    count = np.ones_like(lost)
    got = loss_alarms(lost, count, p)
    # the default wants a run of three failed pings (3 lost in its 3 windows): two are not an outage
    three = np.array([[0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0]], float)
    d = dataclasses.replace(DEFAULT_POLICY, baseline=4)
    assert np.flatnonzero(loss_alarms(three, np.ones_like(three), d)[0]).tolist() == [13]
    # row 0: an outage of two windows after four clean ones -> 2 of 2 lost at p0 0.1 %: tail 1e-6
    assert got[0].tolist() == [False] * 5 + [True] + [False] * 4
    assert not got[1].any()  # one failed ping of two: tail 2e-3, not sure enough
    for r in range(2):
        for t in range(5, 10):  # the one-window call on the same sums
            one = loss_alarm(lost[r, t - 1:t + 1].sum(), count[r, t - 1:t + 1].sum(),
                             lost[r, t - 5:t - 1].sum(), count[r, t - 5:t - 1].sum(), p)
            assert bool(one) == got[r, t]
    # the seeds' rule takes any loss above 1 % (no binomial test): one failed ping of one is an alarm
    seed = DetectorPolicy(factor=2.0, sustain=2.0, k=1, baseline=4, min_sigmas=0.0, loss_windows=1, loss_min=1,
                          alpha=SEED_RULE.alpha)
    assert loss_alarms(lost, count, seed)[1].tolist() == [False] * 8 + [True, False]
    assert loss_alarms(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0, 3)
    with pytest.raises(ValueError, match="one shape"):
        loss_alarms(np.zeros((1, 3)), np.zeros((1, 4)))


def test_bad_policies_are_errors():
    with pytest.raises(ValueError, match="factor >= sustain > 1"):
        DetectorPolicy(factor=1.0, sustain=1.0)
    with pytest.raises(ValueError, match="factor >= sustain > 1"):
        DetectorPolicy(factor=1.1, sustain=1.2)
    with pytest.raises(ValueError, match="floor_q"):
        DetectorPolicy(floor_q=1.0)
    with pytest.raises(ValueError, match="must be"):
        alarms(np.zeros(5))


def reference(y, p: DetectorPolicy):
    """The incidents of one series, window by window, as the module docstring says."""
    out = np.zeros(y.size, bool)
    known, on, left = [], False, 0
    for t, v in enumerate(y):
        if np.isnan(v):
            out[t] = on
            continue
        known.append(v)
        start, now = False, 0.0
        if len(known) >= p.baseline + p.k:
            base = np.array(known[-(p.baseline + p.k):-p.k])
            recent = np.array(known[-p.k:])
            floor = np.quantile(base, p.floor_q)
            spread = 1.4826 * np.median(np.abs(base - floor))
            rises = floor > 0 and recent.min() - floor > p.min_sigmas * spread
            start = rises and recent.min() >= p.sustain * floor and recent.max() >= p.factor * floor
            now = v / floor if floor > 0 else 0.0
        if start:
            on, left = True, p.hold
        elif on:
            if now >= p.release:
                left = p.hold
            elif left > 0:
                left -= 1
            else:
                on = False
        out[t] = on
    return out


POLICIES = [DetectorPolicy(), SEED_RULE, DetectorPolicy(k=3, baseline=5, floor_q=0.2, min_sigmas=0.5, hold=3),
            DetectorPolicy(baseline=30, floor_q=0.5, factor=1.3, sustain=1.2, release=1.25, hold=0)]


@pytest.mark.parametrize("policy", POLICIES)
def test_vectorised_alarms_match_the_reference(policy):
    rng = np.random.default_rng(7)
    rows = []
    for r in range(6):
        y = 20 + rng.gamma(2.0, 0.5, 700)
        for at in rng.integers(0, 700, 5):
            y[at:at + rng.integers(5, 200)] *= rng.uniform(0.6, 2.5)  # episodes up and down
        y[rng.random(700) < 0.03] *= 5  # spikes
        y[rng.random(700) < 0.1 * (r % 3)] = np.nan  # gaps
        y[300 + r:330 + r] = np.nan  # an outage
        rows.append(y)
    rows.append(np.full(700, np.nan))
    rows.append(np.full(700, 12.5))  # constant
    got = alarms(np.stack(rows), policy)
    for r, y in enumerate(rows):
        np.testing.assert_array_equal(got[r], reference(y, policy))
    assert got[:6].any()  # the planted episodes raise something
    rng2 = np.random.default_rng(8)
    gap_free = np.stack([20 + rng2.gamma(2.0, 0.5, 700) * np.r_[np.ones(400), np.full(300, 1.6)] for _ in range(2)])
    np.testing.assert_array_equal(alarms(gap_free, policy), np.stack([reference(y, policy) for y in gap_free]))
    assert alarms(np.zeros((0, 10)), policy).shape == (0, 10)
    assert not alarms(np.zeros((3, 0)), policy).size


def test_ratio_now_is_the_last_column_of_the_full_pass():
    from core.detect import ratio_now, shift_ratios

    p = DetectorPolicy(baseline=20, min_sigmas=6.0)
    rng = np.random.default_rng(11)
    x = 30 + rng.gamma(2.0, 0.3, (40, 60))
    x[::3, 56:] *= 1.6  # shifted four windows ago
    x[rng.random(x.shape) < 0.1] = np.nan
    x[5, -1] = np.nan  # its newest window had no value
    x[7, :50] = np.nan  # little history
    np.testing.assert_allclose(ratio_now(x, p), shift_ratios(x, p)[:, -1])
    assert ratio_now(x, p)[5] == 0.0 and ratio_now(x[:, :3], p).tolist() == [0.0] * 40
    assert (ratio_now(x, p)[::3] >= 1.15).mean() > 0.7  # rows whose newest window is a gap say 0
    assert ratio_now(x[:, :0], p).shape == (40,)


def test_loss_tail_worked_example():
    from core.detect import loss_tail

    # 10 of 100 at p0 0.3 %: KL = 0.1 ln(0.1 / 0.003) + 0.9 ln(0.9 / 0.997) = 0.35066 - 0.09212 = 0.25854
    assert loss_tail([0.1], [100], [0.003])[0] == pytest.approx(math.exp(-25.854), rel=1e-3)
    assert loss_tail([0.002, 0.1], [100, np.nan], [0.003, 0.003]).tolist() == [1.0, 1.0]  # not above p0; no probes


@pytest.mark.parametrize("policy", POLICIES + [DetectorPolicy(baseline=1, k=1, floor_q=0.3),
                                               DetectorPolicy(baseline=11, floor_q=0.95)])
def test_the_compiled_window_stats_are_numpys_bit_for_bit(policy):
    """core.detect._stats (one compiled pass per row) against numpy's quantile, median, min and max of
    the same windows: NaN-padded rows, ties, constant rows, an infinite window, no rows, 3-D input."""
    import warnings

    from core.detect import _stats

    def numpy_stats(w):
        base, recent = w[..., :policy.baseline], w[..., policy.baseline:]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            floor = np.quantile(base, policy.floor_q, axis=-1)
            return (floor, 1.4826 * np.median(np.abs(base - floor[..., None]), axis=-1),
                    np.min(recent, axis=-1), np.max(recent, axis=-1))

    rng = np.random.default_rng(5)
    cases = [np.zeros((0, policy.memory)), rng.lognormal(3, 0.5, (3, 7, policy.memory))]
    for trial in range(120):
        w = rng.lognormal(3, 0.5, (rng.integers(1, 6), policy.memory))
        if trial % 3 == 0:
            w[rng.random(w.shape) < 0.05] = np.nan
        if trial % 5 == 0:
            w[0] = 42.0
        if trial % 7 == 0:
            w = np.round(w)  # ties
        if trial % 11 == 0:
            w[-1, 0] = np.inf
        cases.append(w)
    for w in cases:
        for got, want in zip(_stats(w, policy), numpy_stats(w), strict=True):
            assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)


def test_the_newest_known_windows_are_the_last_finite_values_in_order():
    """core.detect._newest (compiled) against the plain numpy composition it replaced: gaps, infinite
    windows, histories shorter than the memory, no rows, no columns."""
    from core.detect import _newest

    def numpy_newest(x, width):
        ok = np.isfinite(x)
        packed = np.take_along_axis(x, np.argsort(ok, axis=1, kind="stable"), axis=1)
        w = packed[:, -width:] if x.shape[1] >= width else np.c_[np.full((x.shape[0], width - x.shape[1]), np.nan),
                                                                 packed]
        return np.where(np.isfinite(w), w, np.nan), ok[:, -1] if x.shape[1] else np.zeros(x.shape[0], bool)

    rng = np.random.default_rng(9)
    policy = DetectorPolicy(baseline=5, k=2)
    for shape in ((6, 30), (4, 5), (3, 1), (0, 9), (2, 0)):
        x = rng.lognormal(3, 0.4, shape)
        x[rng.random(shape) < 0.3] = np.nan
        if x.size:
            x.flat[0] = np.inf
        got, want = _newest(x, policy), numpy_newest(x, policy.memory)
        assert np.array_equal(got[0], want[0], equal_nan=True) and np.array_equal(got[1], want[1])
    assert _newest(np.array([[1.0, np.nan, 2.0, 3.0]]), DetectorPolicy(baseline=1, k=1))[0].tolist() == [[2.0, 3.0]]
