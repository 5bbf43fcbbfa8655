"""Moving as the seeds mean it (issue 12, findings 4, 5, 7): a task on a failed node moves at once;
patience counts fresh windows of the task's own paths, not rescorings; thresholds scale with
sensitivity and the loss leg needs enough probes. Each scenario failed on 6fdafa7."""

import time

import numpy as np

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def world(now, home_p95=0.5, other_p95=0.6):
    paths = {("n0", "store"): {"rtt_ms": win(now, home_p95)}, ("n1", "store"): {"rtt_ms": win(now, other_p95)}}
    return make_scheduler([gpu_node("n0", now), gpu_node("n1", now)], paths)


def task(tid="t", type_="inference", **kw):
    return Task(id=tid, type=type_, resources={"cards": 1}, data_source={"node": "store", "size_gb": 1}, **kw)


def window(s, node, end, p95, lost=0, count=100):
    w = {**win(end, p95, lost), "count": count, "kept": count - lost}
    s.net.put(f"{node}|store".encode(), {"src": node, "dst": "store", "metrics": {"rtt_ms": w}})
    s.touch()


def test_a_task_on_a_failed_node_moves_at_once_whatever_cooldown_or_age():
    # finding 4: resting after a move, and past its expected duration (no gain left): it stayed
    now = time.time()
    s = world(now)
    assert s.decide(task(expected_duration_s=60), now).nodes == ["n0"]
    s.running["t"].cooldown_until = now + 10_000
    s.inv.put(b"n0", gpu_node("n0", now + 3600, status="down"))
    s.inv.put(b"n1", gpu_node("n1", now + 3600))
    events = s.reschedule(now + 3600)
    assert [(e.task_id, e.to_nodes, e.trigger) for e in events] == [("t", ["n1"], "node_failed")]
    assert s.ledger.nodes_of("t") == ["n1"]


def test_patience_counts_fresh_windows_not_rescorings():
    # finding 5: a stable service (alpha 0.7, patience 4) saw one bad window; four rescorings
    # without a new window used up its patience
    now = time.time()
    s = world(now)
    assert s.decide(task(alpha=0.7), now).nodes == ["n0"]
    window(s, "n0", now + 10, 300.0)
    for k in range(1, 6):
        assert s.reschedule(now + 10 + k) == [], k  # the same window, rescored
    for k in range(1, 4):  # three more bad windows: four in all
        window(s, "n0", now + 10 + 10 * k, 300.0)
        events = s.reschedule(now + 11 + 10 * k)
        assert (events != []) == (k == 3), k
    assert events[0].trigger == "degradation"


def test_thresholds_scale_with_sensitivity():
    # finding 7: p95 1.6x its baseline degrades a sensitive task (1.5x), not a default one (2x)
    from core.reschedule import DEFAULT_POLICY, degraded

    base, now_p95, loss = [1.0, 1.0, 1.0], [1.6, 1.6, 2.5], [0.0, 0.0, 0.0]
    assert degraded(now_p95, base, loss, DEFAULT_POLICY, alpha=[0.2, 0.5, 0.8]).tolist() == [True, False, False]
    # loss 1.5 %: over the sensitive (0.5 %) and default (1 %) limits, under the stable one (2 %)
    assert degraded([1.0] * 3, base, [0.015] * 3, DEFAULT_POLICY, alpha=[0.2, 0.5, 0.8],
                    probes=[1000] * 3).tolist() == [True, True, False]


def test_the_loss_leg_needs_probes_and_a_loss_above_the_paths_own():
    from core.reschedule import DEFAULT_POLICY, degraded

    # 2 lost of 100 probes is 2 %, but 100 probes are too few to say so (at least 200)
    assert degraded([1.0], [1.0], [0.02], DEFAULT_POLICY, alpha=[0.5], probes=[100]).tolist() == [False]
    assert degraded([1.0], [1.0], [0.02], DEFAULT_POLICY, alpha=[0.5], probes=[400]).tolist() == [True]
    # a path that always lost 1.5 % is not degraded at 2 %: 0.5 points above its own loss
    assert degraded([1.0], [1.0], [0.02], DEFAULT_POLICY, alpha=[0.5], probes=[400],
                    loss_baseline=[0.015]).tolist() == [False]
    # the binomial leg: 10 lost of 100 against the 0.3 % background is sure (KL(0.1 || 0.003) =
    # 0.1 ln(33.3) + 0.9 ln(0.9 / 0.997) = 0.2590, tail exp(-25.9) = 6e-12), though under 200 probes;
    # the seeds' rule (detector off) still wants 200
    from core.reschedule import ReschedulePolicy

    assert degraded([1.0], [1.0], [0.1], DEFAULT_POLICY, alpha=[0.5], probes=[100]).tolist() == [True]
    assert degraded([1.0], [1.0], [0.1], ReschedulePolicy(detector=False), alpha=[0.5], probes=[100]).tolist() == [False]


def test_a_few_lost_probes_are_not_a_degradation():
    # 3 lost of 100 probes and p95 1.8x its baseline: the task still moves (n1 is 10+ points better),
    # but as an improvement; 6fdafa7 called it a degradation
    now = time.time()
    s = world(now)
    assert s.decide(task("d", "data-intensive"), now).nodes == ["n0"]  # alpha 0.3: default thresholds
    events = []
    for k in range(1, 4):
        window(s, "n0", now + 10 * k, 0.9, lost=3)
        events += s.reschedule(now + 10 * k + 1)
    assert [(e.to_nodes, e.trigger) for e in events] == [(["n1"], "improvement")]


def test_a_group_with_nowhere_better_to_go_is_judged_without_the_full_evaluation_and_as_it_would_be(monkeypatch):
    """migration._quiet: when no task of a group has a node better by the minimum gain (and none's
    node failed or drains), the verdict is evaluate's — no move, every streak reset — and the
    tasks have still seen their newest windows (patience counts news, not rescorings)."""
    from streams.worker.scheduling import migration

    now = time.time()
    s = world(now, home_p95=0.5, other_p95=0.5)  # two equal nodes: nowhere better
    assert s.decide(task(expected_duration_s=7200, alpha=0.2), now).nodes == ["n0"]
    run = s.running["t"]
    run.streak = 3  # as if an earlier better node had been counted
    window(s, "n0", now + 2, 0.5)
    calls = []
    real = migration._evaluate_group
    monkeypatch.setattr(migration, "_evaluate_group", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert s.reschedule(now + 3) == []
    assert calls == [] and run.streak == 0 and run.seen_window_end == now + 2
    window(s, "n0", now + 4, 40.0)  # its own path degrades: n1 is now much better
    moved = s.reschedule(now + 5)  # n1 is better by more than the minimum now: evaluated in full
    assert calls == [1]
    # alpha 0.2: patience 1, so the one fresh bad window moves it (the gain over two hours beats the cost)
    assert s.policy.patience(np.array([0.2]))[0] == 1
    assert [(e.task_id, e.to_nodes, e.trigger) for e in moved] == [("t", ["n1"], "degradation")]
