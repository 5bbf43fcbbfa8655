"""Battery sizing: every formula on small series worked out by hand, and the vectorised code against
a sample-by-sample reference on random series."""

import numpy as np
import pytest

from core.battery import BatteryInputError, size_battery, size_battery_reference

KWH_PER_MW_MIN = 1000 / 60  # 1 MW for one minute = 16.667 kWh


def test_block_target_worked_example():
    # 1-minute samples, window 2: blocks [10, 20] -> 15 and [30, 10] -> 20
    s = size_battery([10, 20, 30, 10], interval_s=60, window=2)
    assert s.target_mw.tolist() == [15, 15, 20, 20]
    assert s.compensation_mw.tolist() == [-5, 5, 10, -10]  # load - target; + = discharge
    assert s.power_capacity_mw == pytest.approx(10 * 1.2)  # max |P_batt| x margin
    # runs: charge [-5], discharge [5, 10] = 15 MW-min, charge [-10]
    assert s.discharge_energy_kwh == pytest.approx(15 * KWH_PER_MW_MIN)  # 250 kWh
    assert s.charge_energy_kwh == pytest.approx(10 * KWH_PER_MW_MIN)  # 166.7 kWh
    # running sum from 0: 0, -5, 0, 10, 0 MW-min -> swing 15 MW-min
    assert s.soc_swing_kwh == pytest.approx(15 * KWH_PER_MW_MIN)
    # the window discharge: [-5, 5] -> 5, [5, 10] -> 15, [10, -10] -> 10 MW-min: 15, as the run
    assert s.window_discharge_kwh == pytest.approx(15 * KWH_PER_MW_MIN)
    assert s.recommended_energy_kwh == pytest.approx(250 * 1.2 / 0.9)  # 333.3 kWh
    # load ramps 10, 10, 20 MW/min; target ramps 0, 5, 0
    assert s.original_max_ramp_mw_per_min == pytest.approx(20)
    assert s.smoothed_max_ramp_mw_per_min == pytest.approx(5)
    assert s.smoothing_rate_pct == pytest.approx(75)  # (1 - 5/20) x 100
    assert s.ramp_limit_met


def test_ramp_limit_sets_the_smoothed_ramp():
    s = size_battery([10, 20, 30, 10], interval_s=60, window=2, ramp_limit=2.0)
    assert s.smoothed_max_ramp_mw_per_min == 2.0
    assert s.smoothing_rate_pct == pytest.approx(90)  # (1 - 2/20) x 100
    assert not s.ramp_limit_met  # the block target itself steps 5 MW/min: more than the limit
    assert s.power_capacity_mw == pytest.approx(12)  # the sizing itself does not change
    s = size_battery([10, 20, 30, 10], interval_s=60, window=2, ramp_limit=8.0)
    assert s.smoothing_rate_pct == pytest.approx(60) and s.ramp_limit_met


def test_trailing_target_worked_example():
    # 30-second samples, trailing window 2: 10, (10+20)/2, (20+30)/2, (30+10)/2
    s = size_battery([10, 20, 30, 10], interval_s=30, window=2, trailing=True, margin=1.5, dod=0.8)
    assert s.target_mw.tolist() == [10, 15, 25, 20]
    assert s.compensation_mw.tolist() == [0, 5, 5, -10]
    kwh = 30 * 1000 / 3600  # 1 MW for 30 s = 8.333 kWh
    assert s.power_capacity_mw == pytest.approx(10 * 1.5)
    assert s.discharge_energy_kwh == pytest.approx(10 * kwh)  # run [5, 5]
    assert s.charge_energy_kwh == pytest.approx(10 * kwh)  # run [-10]
    assert s.soc_swing_kwh == pytest.approx(10 * kwh)  # 0, 0, 5, 10, 0
    assert s.recommended_energy_kwh == pytest.approx(10 * kwh * 1.5 / 0.8)
    # per minute: load steps 10, 10, 20 per half minute -> 40 MW/min; target 5, 10, 5 -> 20 MW/min
    assert s.original_max_ramp_mw_per_min == pytest.approx(40)
    assert s.smoothed_max_ramp_mw_per_min == pytest.approx(20)
    assert s.smoothing_rate_pct == pytest.approx(50)


def test_partial_last_block_and_runs_split_by_sign():
    # blocks [4, 8] -> 6, [6, 2] -> 4, [9] -> 9 (a partial block is its own mean)
    s = size_battery([4, 8, 6, 2, 9], interval_s=60, window=2)
    assert s.target_mw.tolist() == [6, 6, 4, 4, 9]
    assert s.compensation_mw.tolist() == [-2, 2, 2, -2, 0]
    assert s.discharge_energy_kwh == pytest.approx(4 * KWH_PER_MW_MIN)  # [2, 2] in one run
    assert s.charge_energy_kwh == pytest.approx(2 * KWH_PER_MW_MIN)  # two separate runs of -2
    assert s.soc_swing_kwh == pytest.approx(4 * KWH_PER_MW_MIN)  # 0, -2, 0, 2, 0, 0


def test_the_window_discharge_rule_counts_no_charge_in_between():
    # window 4: the block mean of [13, 9, 13, 5] is 10; compensation [3, -1, 3, -5]
    s = size_battery([13, 9, 13, 5], interval_s=60, window=4)
    assert s.compensation_mw.tolist() == [3, -1, 3, -5]
    assert s.discharge_energy_kwh == pytest.approx(3 * KWH_PER_MW_MIN)  # runs [3] and [3]
    assert s.charge_energy_kwh == pytest.approx(5 * KWH_PER_MW_MIN)
    assert s.soc_swing_kwh == pytest.approx(5 * KWH_PER_MW_MIN)  # 0, 3, 2, 5, 0
    # within the one window 3 + 3 = 6 MW-min are discharged (the -1 between is not counted on)
    assert s.window_discharge_kwh == pytest.approx(6 * KWH_PER_MW_MIN)
    assert s.recommended_energy_kwh == pytest.approx(6 * KWH_PER_MW_MIN * 1.2 / 0.9)  # 133.3 kWh
    # window 2: blocks [13, 9] -> 11 and [13, 5] -> 9, compensation [2, -2, 4, -4]; the sliding
    # windows discharge 2, 4 and 4 MW-min
    assert size_battery([13, 9, 13, 5], interval_s=60, window=2).window_discharge_kwh == pytest.approx(
        4 * KWH_PER_MW_MIN)


def test_constant_load_needs_no_battery():
    s = size_battery([5.0] * 10, interval_s=1, window=3)
    assert s.power_capacity_mw == 0 and s.recommended_energy_kwh == 0 and s.smoothing_rate_pct == 0
    assert (s.compensation_mw == 0).all()


@pytest.mark.parametrize("trailing", [False, True])
def test_vectorised_matches_the_reference(trailing):
    rng = np.random.default_rng(3)
    for n, w in ((1, 1), (7, 3), (100, 10), (1000, 60), (999, 7)):
        load = np.abs(50 + np.cumsum(rng.normal(0, 3, n)) + rng.normal(0, 5, n))
        got = size_battery(load, 60.0, w, ramp_limit=None, trailing=trailing)
        want = size_battery_reference(load, 60.0, w, trailing=trailing)
        for k, v in want.items():
            assert np.allclose(getattr(got, k), v, rtol=1e-9, atol=1e-9), (n, w, k)


def test_a_year_of_minutes():
    load = 50 + 20 * np.sin(np.arange(525_600) / 300.0)
    s = size_battery(load, 60.0, 15)
    assert s.target_mw.size == 525_600 and s.power_capacity_mw > 0


@pytest.mark.parametrize("kw,msg", [
    (dict(load_mw=[1, 2], window=3), "fewer than one window"),
    (dict(load_mw=[1, float("nan"), 2]), "sample 2 is nan"),
    (dict(load_mw=[1, -2, 2]), "sample 2 is -2"),
    (dict(load_mw=[1, 2, 3], interval_s=0), "interval"),
    (dict(load_mw=[1, 2, 3], dod=0), "depth of discharge"),
    (dict(load_mw=[1, 2, 3], ramp_limit=0), "ramp limit"),
    (dict(load_mw=[1, 2, 3], margin=0), "margin"),
])
def test_bad_input_is_a_clear_error(kw, msg):
    args = {"interval_s": 60, "window": 1, **kw}
    with pytest.raises(BatteryInputError, match=msg):
        size_battery(**args)
