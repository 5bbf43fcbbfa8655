import numpy as np
import pytest

from core.reschedule import (
    DEFAULT_POLICY,
    degraded,
    evaluate,
    expected_gain_s,
    migration_cost_s,
    remaining_s,
    worst_known,
)
from core.vocabulary import DEGRADATION, IMPROVEMENT, NODE_JOINED


def one(current, best, deg=False, joined=False, alpha=0.2, streak=0, remaining=7200.0, cost=300.0, resting=False):
    a = lambda v: np.array([v])  # noqa: E731
    return evaluate(a(current), a(best), a(deg), a(joined), a(alpha), a(streak), a(remaining), a(cost), a(resting))


def test_degradation_rules():
    # p95 doubled -> degraded; 1.9x -> not; loss 2 % -> degraded; unknown baseline -> only loss counts
    got = degraded(np.array([2.0, 1.9, 1.0, 5.0]), np.array([1.0, 1.0, 1.0, np.nan]), np.array([0, 0, 0.02, 0]))
    assert got.tolist() == [True, False, True, False]


def test_cost_and_gain_worked_example():
    # 40 GB checkpoint over 10 Gbit/s: 32 s transfer + 30 save + 30 restore + 8 queueing = 100 s
    assert migration_cost_s(np.array([40.0]), np.array([10.0]), np.array([8.0]))[0] == pytest.approx(100.0)
    # 2 h left, composite 40 -> 80: runs twice as fast, saves half the remaining time
    assert expected_gain_s(np.array([40.0]), np.array([80.0]), np.array([7200.0]))[0] == pytest.approx(3600.0)
    assert expected_gain_s(np.array([80.0]), np.array([40.0]), np.array([7200.0]))[0] == 0.0
    assert migration_cost_s(np.array([1.0]), np.array([0.0]), np.array([0.0]))[0] == np.inf  # no path


def test_remaining_time_worked_example_and_an_overrunning_task_stays_movable():
    # expected 10 h: ran 4 h -> 6 h left; ran 9.5 h -> 1 h (the 10 % floor, not 0.5 h); ran 30 h -> 1 h
    got = remaining_s(np.array([36000.0] * 3), np.array([14400.0, 34200.0, 108000.0]))
    assert got.tolist() == [21600.0, 3600.0, 3600.0]
    assert remaining_s(np.zeros(0), np.zeros(0)).shape == (0,)
    # a gang that runs 3x slower than estimated overran; composite 54 -> 74 still pays for a 62 s move
    left = remaining_s(np.array([237670.0]), np.array([400000.0]))
    assert one(54.0, 74.0, streak=5, remaining=left[0], cost=62.0).move[0]


def test_sensitive_job_moves_when_latency_doubles():
    # data-parallel (alpha 0.2, patience 1): its path degraded, another node now scores 75 vs 45
    e = one(current=45.0, best=75.0, deg=True, alpha=0.2)
    assert e.move[0] and e.trigger[0] == DEGRADATION
    # gain 7200 x (1 - 45/75) = 2880 s > cost 300 x 1.2
    assert e.gain_s[0] == pytest.approx(2880.0)


def test_stable_inference_service_waits_for_four_bad_windows():
    streak = 0
    moves = []
    for _ in range(4):
        e = one(current=45.0, best=75.0, deg=True, alpha=0.9, streak=streak)
        streak = int(e.streak[0])
        moves.append(bool(e.move[0]))
    assert moves == [False, False, False, True]


def test_no_migration_when_cost_exceeds_gain():
    # 10 minutes left: gain 600 x (1 - 45/75) = 240 s < cost 300 s
    e = one(current=45.0, best=75.0, deg=True, remaining=600.0)
    assert not e.move[0] and e.gain_s[0] == pytest.approx(240.0)


def test_improvement_and_node_joined_triggers_and_cool_down():
    assert one(current=40.0, best=80.0).trigger[0] == IMPROVEMENT
    assert one(current=40.0, best=80.0, joined=True).trigger[0] == NODE_JOINED
    assert not one(current=40.0, best=80.0, resting=True).move[0]


def test_no_flapping_under_noisy_but_stable_quality():
    rng = np.random.default_rng(0)
    streak = np.zeros(50, dtype=int)
    moves = 0
    for _ in range(200):  # current and best both ~60 with noise of +-4 points
        cur = 60 + rng.uniform(-4, 4, 50)
        best = 60 + rng.uniform(-4, 4, 50)
        e = evaluate(cur, best, np.zeros(50, bool), np.zeros(50, bool), np.full(50, 0.5), streak,
                     np.full(50, 7200.0), np.full(50, 300.0), np.zeros(50, bool))
        streak = e.streak
        moves += int(e.move.sum())
    assert moves == 0


def test_same_state_same_decisions():
    args = [np.array(v) for v in ([40.0, 50.0], [90.0, 52.0], [True, False], [False, False], [0.2, 0.2],
                                  [0, 0], [7200.0, 7200.0], [100.0, 100.0], [False, False])]
    a, b = evaluate(*args), evaluate(*args)
    assert a.move.tolist() == b.move.tolist() == [True, False]
    assert DEFAULT_POLICY.patience(np.array([0.1, 0.5, 0.9])).tolist() == [1, 2, 4]


def test_per_task_worst_matches_the_per_task_reference():
    from core.reschedule import (
        endpoint_worst,
        endpoint_worst_loss,
        worst_loss_per_task,
        worst_per_task,
    )

    rng = np.random.default_rng(3)
    E, N, T = 9, 6, 40
    values = rng.uniform(0, 10, (E, N))
    values[rng.random((E, N)) < 0.3] = np.nan
    loss = np.round(rng.uniform(0, 0.05, (E, N)), 2)  # ties on purpose
    loss[rng.random((E, N)) < 0.3] = np.nan
    probes = rng.integers(0, 500, (E, N)).astype(float)
    counts = rng.integers(0, 4, T)  # tasks with no endpoint too
    ep_ptr = np.r_[0, np.cumsum(counts)]
    ep_idx = rng.integers(0, E, ep_ptr[-1])
    cols = rng.integers(0, N, T)
    got = worst_per_task(values, ep_ptr, ep_idx, cols)
    want = [endpoint_worst(values, ep_idx[ep_ptr[t]:ep_ptr[t + 1]], cols[t]) for t in range(T)]
    np.testing.assert_array_equal(got, want)
    gl, gp = worst_loss_per_task(loss, probes, ep_ptr, ep_idx, cols)
    for t in range(T):
        rows = ep_idx[ep_ptr[t]:ep_ptr[t + 1]]
        wl, _ = endpoint_worst_loss(loss, probes, rows, cols[t])
        assert (np.isnan(gl[t]) and np.isnan(wl)) or gl[t] == wl
        ties = [probes[r, cols[t]] for r in rows if loss[r, cols[t]] == wl]
        assert gp[t] == (max(ties) if ties else 0.0)
    empty = worst_per_task(values, np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty.shape == (0,)


def test_migration_cost_worked_example_with_measured_save_restore_and_the_data_reload():
    from core.reschedule import migration_cost_s

    # 10 GB over 5 Gbit/s = 16 s, saved in 12 s, restored in 8 s, 50 GB over 20 Gbit/s = 20 s: 56 s;
    # not measured yet (NaN): the policy's 30 s + 30 s; no data: no reload; no bandwidth: infinite
    got = migration_cost_s(np.array([10.0, 10.0, 0.0, 1.0]), np.array([5.0, 5.0, 5.0, 0.0]), np.zeros(4),
                           save_s=np.array([12.0, np.nan, 12.0, 12.0]), restore_s=np.array([8.0, np.nan, 8.0, 8.0]),
                           reload_gb=np.array([50.0, 50.0, 0.0, 0.0]), reload_gbps=np.array([20.0, 20.0, 20.0, 20.0]))
    assert got[:3].tolist() == [56.0, 16.0 + 60.0 + 20.0, 20.0] and np.isinf(got[3])


def test_worst_known_is_nanmax_with_nan_when_nothing_is_known():
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = rng.normal(size=int(rng.integers(0, 6)))
        v[rng.random(v.size) < 0.4] = np.nan
        want = float(np.nanmax(v)) if (~np.isnan(v)).any() else None
        for given in (v, v.tolist(), v.reshape(1, -1)):
            got = worst_known(given)
            assert (np.isnan(got) if want is None else got == want), (v, got)
    assert worst_known([np.float32(2.5), np.nan, 1]) == 2.5 and np.isnan(worst_known([]))
