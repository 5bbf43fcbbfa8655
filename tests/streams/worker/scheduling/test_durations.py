"""Run times from history (streams/worker/scheduling/durations.py, core.estimates.predicted_runs): a task
is planned with its own figure times the mean share of their figures its submitter's last two runs
took, never more than its own figure; past its prediction it is planned with its own figure again;
its time limit stays. Numbers by hand."""

import math

import numpy as np
import pytest

from core.estimates import predicted_runs
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler

NOW = 1_000_000.0


def test_predicted_runs_worked_examples():
    got = predicted_runs([3600.0, 7200.0, 3600.0, 3600.0, 3600.0],
                         [[1 / 6, 5 / 18], [1 / 6, 5 / 18], [1.4, 2.5], [np.nan, np.nan], [np.nan, 1 / 18]])
    # 3,600 x (1/6 + 5/18) / 2 = 800; 7,200 x the same 4/9 = 3,200 / 2 = 1,600; ratios above 1 -> the
    # figure itself; no run -> the figure; one run -> 3,600 / 18 = 200
    np.testing.assert_allclose(got, [800.0, 1600.0, 3600.0, 3600.0, 200.0])
    assert predicted_runs([], np.zeros((0, 2))).size == 0


def task(tid, duration=3600.0, by="alice", **kw):
    return Task(id=tid, type="fine-tune", resources={"cards": 8}, submitted_at=NOW, expected_duration_s=duration,
                submitted_by=by, **kw)


def scheduler():
    s = make_scheduler([gpu_node("n0", NOW, fp16=1500.0), gpu_node("n1", NOW)], {})
    s.node_timeout_s, s.freshness = math.inf, None
    return s


def test_a_submitters_last_two_runs_plan_the_next_task():
    s = scheduler()
    assert s.decide(task("a"), NOW).nodes == ["n0"]  # the faster card (1.5x the slowest)
    assert s.decide(task("b"), NOW).nodes == ["n1"]
    assert s.finished("a", NOW + 400) and s.finished("b", NOW + 1000)
    # runs in the slowest card's seconds: 400 x 1.5 = 600 and 1,000 x 1 = 1,000, of the 3,600 s each
    # task's user gave: shares 1/6 and 5/18 -> a 3,600 s task is planned at 800 s
    np.testing.assert_allclose(list(s.durations.ratios["alice"]), [1 / 6, 5 / 18])
    s.decide(task("c", time_limit_s=7200.0), NOW + 1000)
    run = s.running["c"]
    assert run.task.expected_duration_s == pytest.approx(800.0) and run.task.time_limit_s == 7200.0
    s.decide(task("d", by="bob"), NOW + 1000)  # bob has no run yet: his own figure
    assert s.running["d"].task.expected_duration_s == 3600.0
    s.finished("d", NOW + 1000)
    s.decide(task("e", duration=7200.0), NOW + 1000)  # alice asks for twice as long: twice the plan
    assert s.running["e"].task.expected_duration_s == pytest.approx(1600.0)
    speed = 1.5 if s.running["e"].nodes == ["n0"] else 1.0
    s.finished("e", NOW + 1900)  # 900 s: its share is of the 7,200 s its user gave, not of its plan
    assert s.durations.ratios["alice"][-1] == pytest.approx(900.0 * speed / 7200.0)
    # c runs past its 800 s: from then on it is planned with the 3,600 s its user gave
    s.retry_pending(NOW + 1500)
    assert s.running["c"].task.expected_duration_s == pytest.approx(800.0)
    s.retry_pending(NOW + 1801)
    assert s.running["c"].task.expected_duration_s == 3600.0


def test_an_anonymous_task_is_planned_with_the_pools_last_runs():
    s = scheduler()
    s.decide(task("a"), NOW)  # alice's, on n0 (1.5x)
    s.decide(task("b", by=None), NOW)  # no submitter, no team: anonymous, on n1
    assert s.running["a"].nodes == ["n0"] and s.running["b"].nodes == ["n1"]
    s.finished("a", NOW + 400)  # 400 x 1.5 = 600 of 3,600: 1/6
    s.finished("b", NOW + 1000)  # 1,000 x 1 of 3,600: 5/18
    # the pool holds every run; alice's record her own only
    np.testing.assert_allclose(list(s.durations.pool), [1 / 6, 5 / 18])
    np.testing.assert_allclose(list(s.durations.ratios["alice"]), [1 / 6])
    assert "" not in s.durations.ratios
    s.decide(task("c", by=None, duration=7200.0), NOW + 1000)  # 7,200 x (1/6 + 5/18) / 2 = 7,200 x 2/9 = 1,600
    assert s.running["c"].task.expected_duration_s == pytest.approx(1600.0)
    s.decide(task("d", by="bob"), NOW + 1000)  # bob has no run yet: his own figure, not the pool's
    assert s.running["d"].task.expected_duration_s == 3600.0
    s.finished("d", NOW + 1000)
    s.decide(task("e", by=None, team="ml"), NOW + 1000)  # a team is a submitter: ml has no run
    assert s.running["e"].task.expected_duration_s == 3600.0


def test_an_anonymous_task_before_any_run_is_planned_with_its_figure_and_the_pool_keeps_its_last_runs():
    from streams.worker.scheduling.durations import POOL_KEEP

    s = scheduler()
    s.decide(task("a", by=None), NOW)
    assert s.running["a"].task.expected_duration_s == 3600.0
    for k in range(POOL_KEEP + 5):
        s.durations.finished(task(f"f{k}", by=None), 360.0 if k < 5 else 1800.0, 1.0)
    assert len(s.durations.pool) == POOL_KEEP and set(s.durations.pool) == {0.5}  # the first five are gone
    s.decide(task("b", by=None), NOW)
    assert s.running["b"].task.expected_duration_s == pytest.approx(1800.0)


def test_predictions_of_tasks_gone_without_finishing_are_forgotten():
    s = scheduler()
    s.decide(task("a"), NOW)
    s.finished("a", NOW + 400)  # alice's runs: 600 s
    for k in range(100):  # predicted at 600 s each, queued (n0 and n1 are taken), then cancelled
        s.decide(task(f"q{k}"), NOW + 400)
    s.decide(task("x"), NOW + 400)
    assert len(s.durations.given) >= 100
    for k in range(100):
        s.cancel(f"q{k}", NOW + 401)
    s.retry_pending(NOW + 402)
    assert set(s.durations.given) <= set(s.running) | set(s.pending)


def test_a_prediction_never_exceeds_the_users_figure_and_the_topology_baseline_makes_none():
    s = scheduler()
    s.decide(task("a"), NOW)
    s.finished("a", NOW + 5000)  # ran 5,000 s x 1.5 = 7,500 s: longer than the next task's 3,600 s
    s.decide(task("b"), NOW + 5000)
    assert s.running["b"].task.expected_duration_s == 3600.0
    from streams.replay.baselines import TopologyScheduler

    assert TopologyScheduler(s.net, s.inv).durations is None


def test_the_worker_plans_with_history_unless_told_to_plan_with_the_users_figures():
    from streams.config import Settings
    from streams.worker.scheduling.wiring import make_scheduler as from_settings

    s = scheduler()
    assert from_settings(Settings(), s.net, s.inv).durations is not None
    assert from_settings(Settings(run_predictions="figures"), s.net, s.inv).durations is None
