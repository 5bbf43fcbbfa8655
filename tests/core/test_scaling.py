"""Elastic services' replica counts (core.scaling), with the numbers worked out by hand."""

import math

import numpy as np
import pytest

from core.scaling import (
    DAY_S,
    ScalingPolicy,
    desired_replicas,
    forecast_rate,
    predictive_replicas,
    reactive_replicas,
    rise_quantile,
    simulate,
    standby_for,
)

NONE = np.array([], np.int64)


def test_reactive_is_the_autoscaler_rule_with_its_tolerance():
    # 4 replicas at 90 % for a 60 % target: ceil(4 x 0.9 / 0.6) = ceil(6.0) = 6
    assert reactive_replicas(4, 0.9, 0.6) == 6
    # 4 at 0.65: |0.65 / 0.6 - 1| = 0.083 <= 0.1: unchanged; at 0.7 (0.167 off): ceil(4.667) = 5
    assert reactive_replicas(4, 0.65, 0.6) == 4
    assert reactive_replicas(4, 0.7, 0.6) == 5
    # 10 at 12 %: ceil(10 x 0.12 / 0.6) = ceil(2.0) = 2
    assert reactive_replicas(10, 0.12, 0.6) == 2
    assert reactive_replicas(3, math.nan, 0.6) == 3 and reactive_replicas(0, 0.5, 0.6) == 0


def test_predictive_serves_the_forecast_at_the_target():
    # 4 replicas at 50 % serve 200 req/s: one replica serves 200 / (4 x 0.5) = 100 req/s at full load;
    # 420 req/s forecast at 60 %: ceil(420 / 60) = 7
    assert predictive_replicas(4, 0.5, 200.0, 420.0, 0.6) == 7
    assert predictive_replicas(4, 0.0, 200.0, 420.0, 0.6) == 0  # nothing says what a replica serves
    assert predictive_replicas(4, 0.5, 200.0, math.nan, 0.6) == 0


def test_desired_takes_the_larger_then_bounds_and_stabilises_scale_down():
    p = ScalingPolicy(min_replicas=2, max_replicas=6, target_utilisation=0.6)
    assert desired_replicas(4, 0.5, 200.0, 420.0, p, NONE) == (6, "forecast", 7)  # 7 capped at 6
    # one replica serves 200 / (4 x 0.75) = 66.7 req/s: the forecast 150 wants ceil(150 / 40) = 4;
    # reactive ceil(4 x 0.75 / 0.6) = 5 is more
    assert desired_replicas(4, 0.75, 200.0, 150.0, p, NONE) == (5, "utilisation", 5)
    # 6 at 10 %: reactive 1, forecast of the same rate ceil(60 / (100 x 0.6)) = 1, bounded to 2
    assert desired_replicas(6, 0.1, 60.0, 60.0, p, NONE) == (2, "idle", 1)
    # within the window 5 were wanted: down to 5 only
    assert desired_replicas(6, 0.1, 60.0, 60.0, p, np.array([3, 5, 2])) == (5, "idle", 1)
    # a window that wanted more than there are does not scale up
    assert desired_replicas(6, 0.1, 60.0, 60.0, p, np.array([9])) == (6, "", 1)
    # the bounds alone: 1 replica at the target, minimum 2
    assert desired_replicas(1, 0.6, 10.0, 10.0, p, NONE) == (2, "bounds", 1)


def test_the_forecast_follows_the_trend_without_a_day_of_history():
    t = np.arange(0, 601, 60.0)
    rate = 100 + 0.1 * t  # +6 req/s a minute: 160 at 600 s
    # the last 600 s (samples 60..600 s: a 540 s span) carried 540 s ahead: 160 + 0.1 x 540 = 214
    assert forecast_rate(t, rate, 600.0, 600.0) == pytest.approx(214.0)
    # lead 300: samples 360..600 (240 s) carried 240 s, not 300: 160 + 24 = 184
    assert forecast_rate(t, rate, 600.0, 300.0) == pytest.approx(184.0)
    assert forecast_rate(t, 100 - 0.5 * t, 600.0, 600.0) == 0.0  # never below zero
    assert forecast_rate([60.0], [42.0], 60.0, 600.0) == 42.0
    # a trend seen over 20 s is carried 20 s ahead, not 600: 120 + 2 x 20 = 160 (not 1,320)
    assert forecast_rate([80.0, 90.0, 100.0], [80.0, 100.0, 120.0], 100.0, 600.0) == pytest.approx(160.0)
    assert math.isnan(forecast_rate([], [], 0.0, 600.0))


def test_the_forecast_is_yesterday_at_the_target_time_scaled_by_today_against_yesterday():
    step = 300.0
    t = np.arange(0, DAY_S + 3600 + step, step)
    day = 100 + 50 * (t % DAY_S >= 3600)  # 100 req/s in the first hour of a day, then 150
    today_up = np.where(t > DAY_S, day * 1.2, day)  # today runs 20 % above yesterday
    now = DAY_S + 3000.0  # 10 min before 01:00
    # today's level: the samples in (now - 900, now] (00:40, 00:45, 00:50) are 120; a day before 100:
    # ratio 1.2. The target time a day ago is 01:00 (3600 s); the samples within 450 s of it (3300,
    # 3600, 3900) are 100, 150, 150: 133.3 x 1.2 = 160
    assert forecast_rate(t, today_up, now, 600.0, level_s=900.0) == pytest.approx(160.0)
    # today five times yesterday: the ratio is held at 2
    assert forecast_rate(t, np.where(t > DAY_S, day * 5, day), now, 600.0) == pytest.approx(400.0 / 3 * 2)


def test_simulate_counts_replica_hours_and_unserved_requests():
    # a constant 60 req/s, 20 req/s per replica: 60 / (20 x 0.6) = 5 replicas; starting from 1
    rate = np.full(10, 60.0)
    run = simulate(rate, 60.0, 20.0, ScalingPolicy(min_replicas=1, max_replicas=8, lead_s=0), load_s=120.0)
    # step 0: 1 ready (cap 20, 40 unserved), util 1.0 -> ceil(1 / 0.6) = 2 wanted, ready at step 2;
    # step 1: 1 ready, 40 unserved; 2 counted at 0.5 each: ceil(2 x 0.5 / 0.6) = 2: unchanged;
    # step 2: 2 ready (cap 40, 20 unserved), util 1 -> 4 wanted, ready at step 4;
    # step 3: 20 unserved; step 4: 4 ready, cap 80, util 0.75 -> ceil(4 x 0.75 / 0.6) = 5, ready at 6;
    # steps 4, 5: served; then 5 from step 6 on
    assert run.replicas.tolist() == [1, 1, 2, 2, 4, 4, 5, 5, 5, 5]
    assert run.unserved_share == pytest.approx((40 + 40 + 20 + 20) * 60 / (600 * 60))
    assert run.overloaded_share == pytest.approx(0.4)
    # paid: loading replicas count: 2, 2, 4, 4, 5, 5, 5, 5, 5, 5 = 42 replica-minutes
    assert run.replica_hours == pytest.approx(42 / 60)


def test_a_warm_standby_serves_at_once():
    rate = np.array([10.0, 10.0, 30.0, 30.0, 30.0, 30.0])
    cold = simulate(rate, 60.0, 20.0, ScalingPolicy(min_replicas=1, lead_s=0, target_utilisation=0.75),
                    load_s=180.0)
    warm = simulate(rate, 60.0, 20.0, ScalingPolicy(min_replicas=1, lead_s=0, target_utilisation=0.75, standby=1),
                    load_s=180.0)
    # at step 2 the load jumps to 30 (cap 20): 2 wanted; cold waits 3 steps, warm promotes its standby
    assert cold.replicas.tolist() == [1, 1, 1, 1, 1, 2]
    assert warm.replicas.tolist() == [1, 1, 2, 2, 2, 2]
    assert warm.unserved_share < cold.unserved_share and warm.standby.tolist() == [1, 1, 0, 0, 0, 1]


def test_simulate_takes_empty_nan_and_zero_rates():
    assert simulate(np.array([]), 60.0, 10.0, ScalingPolicy(), 60.0).replica_hours == 0.0
    run = simulate(np.array([np.nan, 0.0, 0.0]), 60.0, 10.0, ScalingPolicy(min_replicas=1, lead_s=0), 60.0)
    assert run.replicas.tolist() == [1, 1, 1] and run.unserved_share == 0.0


def test_a_latency_target_takes_the_larger_count():
    p = ScalingPolicy(min_replicas=1, max_replicas=10, target_latency_ms=200.0, lead_s=0)
    # utilisation on target keeps 4; 300 ms against 200: ceil(4 x 1.5) = 6
    assert desired_replicas(4, 0.6, 100.0, math.nan, p, NONE, latency_ms=300.0) == (6, "latency", 6)
    # 210 ms is within the 10 % tolerance: the utilisation's 5 (ceil(4 x 0.75 / 0.6)) decides
    assert desired_replicas(4, 0.75, 100.0, math.nan, p, NONE, latency_ms=210.0) == (5, "utilisation", 5)
    # no latency target: the latency is not read
    assert desired_replicas(4, 0.6, 100.0, math.nan, ScalingPolicy(lead_s=0), NONE, latency_ms=900.0)[0] == 4


def _rises_by_hand(t, rate, horizon, q):
    """The plain reference: every sample whose horizon the samples cover, its rise, the inverted-CDF
    quantile (the smallest rise with at least q of the samples at or below it)."""
    rises = []
    for i in range(len(t)):
        later = [rate[j] for j in range(i + 1, len(t)) if t[j] <= t[i] + horizon]
        if later and t[i] + horizon <= t[-1]:
            rises.append(max(max(later) - rate[i], 0.0))
    if not rises:
        return math.nan
    rises.sort()
    return rises[max(math.ceil(q * len(rises)) - 1, 0)]


def test_the_rise_within_a_cold_start_by_hand():
    t = np.array([0.0, 60.0, 120.0, 180.0, 240.0])
    rate = np.array([10.0, 20.0, 10.0, 10.0, 40.0])
    # horizon 60 s: the samples at 0..180 are covered; their rises 20-10=10, 10-20<0 -> 0, 0, 40-10=30:
    # sorted [0, 0, 10, 30]; the 0.5-quantile is the 2nd (0), the 0.75 the 3rd (10), the 0.9 the 4th (30)
    assert rise_quantile(t, rate, 60.0, 0.5) == 0.0
    assert rise_quantile(t, rate, 60.0, 0.75) == 10.0
    assert rise_quantile(t, rate, 60.0, 0.9) == 30.0
    # horizon 120 s: 0..120 covered; rises max(20,10)-10=10, max(10,10)-20 -> 0, max(10,40)-10=30
    assert rise_quantile(t, rate, 120.0, 0.6) == 10.0 and rise_quantile(t, rate, 120.0, 0.7) == 30.0
    # a NaN sample is left out; one sample, none, or a horizon past the history: nothing to say
    assert rise_quantile(np.append(t, 300.0), np.append(rate, np.nan), 60.0, 0.9) == 30.0
    assert math.isnan(rise_quantile(t[:1], rate[:1], 60.0, 0.9))
    assert math.isnan(rise_quantile(t[:0], rate[:0], 60.0, 0.9))
    assert math.isnan(rise_quantile(t, rate, 600.0, 0.9))
    # a constant rate never rises
    assert rise_quantile(t, np.full(5, 7.0), 60.0, 0.99) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_the_rise_against_its_plain_reference(seed):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(5.0, 60.0, 300))
    rate = rng.gamma(2.0, 10.0, 300)
    for horizon, q in ((60.0, 0.5), (300.0, 0.95), (900.0, 0.99)):
        assert rise_quantile(t, rate, horizon, q) == pytest.approx(_rises_by_hand(t, rate, horizon, q))


def test_the_standby_carries_the_rate_plus_the_rise_beside_the_serving_replicas():
    # 300 req/s, a replica serves 100 at full load, 3 serve: a rise of 150 needs ceil(450/100 - 3) = 2 more
    assert standby_for(300.0, 100.0, 3, 150.0, 0, 5) == 2
    assert standby_for(300.0, 100.0, 3, 0.0, 1, 5) == 1  # no rise: the floor
    assert standby_for(300.0, 100.0, 3, 900.0, 0, 5) == 5  # ceil(12 - 3) = 9, the maximum leaves room for 5
    assert standby_for(300.0, 100.0, 3, 900.0, 2, 0) == 2  # the floor holds even where the maximum leaves none
    assert standby_for(math.nan, 100.0, 3, 150.0, 1, 5) == 1 and standby_for(300.0, 100.0, 3, math.nan, 1, 5) == 1
    assert standby_for(300.0, 0.0, 3, 150.0, 1, 5) == 1


def test_a_sized_standby_follows_the_bursts_it_has_seen():
    # 10 req/s for three minutes, then 30 for three, again and again; a replica serves 20 and loads in 120 s.
    rate = np.array([10.0, 10.0, 10.0, 30.0, 30.0, 30.0] * 4)
    base = ScalingPolicy(min_replicas=1, max_replicas=8, lead_s=0, target_utilisation=0.75, scale_down_delay_s=0)
    none = simulate(rate, 60.0, 20.0, base, 120.0)
    sized = simulate(rate, 60.0, 20.0, ScalingPolicy(**{**base.__dict__, "standby_cover": 0.9}), 120.0)
    # the first burst comes before any rise is seen: no standby; once seen (the rise within 120 s is 20
    # req/s at the 0.9-quantile), a replica at 10 req/s keeps ceil((10 + 20) / 20 - 1) = 1 warm, which
    # serves each later burst at once, as a fixed standby of 1 would
    assert sized.standby.tolist()[:5] == [0, 0, 0, 0, 0]
    assert sized.standby.tolist()[6:9] == [1, 1, 1] and sized.replicas.tolist()[9:12] == [2, 2, 2]
    assert none.replicas.tolist()[9:12] == [1, 1, 2]
    assert sized.unserved_share < none.unserved_share
    # a constant rate never rises: a sized standby keeps its floor
    flat = simulate(np.full(30, 10.0), 60.0, 20.0, ScalingPolicy(**{**base.__dict__, "standby_cover": 0.9}), 120.0)
    assert set(flat.standby.tolist()) == {0}
