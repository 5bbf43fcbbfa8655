"""The degradation detector in the scheduler: each path keeps its last window p95s (PathColumns),
the path table carries their shift ratio, and a task's trigger says `degradation` when its path
shifted by its sensitivity's factor, even far below the placement rule's 1.5x-3x."""

import time

import numpy as np

from core.reschedule import DEFAULT_POLICY, ReschedulePolicy, degraded
from streams.adapters.network import PathColumns
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def test_each_path_remembers_one_p95_per_window():
    cols = PathColumns()
    rec = {"src": "a", "dst": "b", "metrics": {"rtt_ms": win(10.0, 5.0)}}
    cols.set(rec)
    cols.set(rec)  # the same window again (a replayed changelog): not a second entry
    cols.set({**rec, "metrics": {"rtt_ms": win(20.0, 6.0)}})
    rows = cols.set_many(["a", "c"], ["b", "d"], {"p95": np.array([7.0, 1.0]), "end": np.array([30.0, 30.0])})
    cols.set_many(["a", "c"], ["b", "d"], {"p95": np.array([8.0, 2.0]), "end": np.array([30.0, 40.0])}, rows)
    h = cols.history(rows)
    assert h.shape == (2, PathColumns.HISTORY)
    assert h[0, -3:].tolist() == [5.0, 6.0, 7.0] and np.isnan(h[0, :-3]).all()  # end 30 twice: pushed once
    assert h[1, -2:].tolist() == [1.0, 2.0]
    for i in range(100):  # growth keeps the rings of the old rows, new rows start empty
        cols.set({"src": f"x{i}", "dst": "y", "metrics": {"rtt_ms": win(10.0, 1.0)}})
    assert cols.history(rows)[0, -3:].tolist() == [5.0, 6.0, 7.0]
    assert np.isnan(cols.history(np.array([cols.n - 1]))[0, :-1]).all()


def test_the_memory_keeps_one_p95_per_detector_step_the_last_windows():
    cols = PathColumns(step_s=240.0)
    rows = None
    # 10-second windows over three 4-minute steps: 0-240 (ends 10..240 -> step 0 ends at 230; 240 is
    # step 1), then a spike at 250 overwritten by 260, then a window at 490 (step 2)
    for end, p95 in [(10.0, 5.0), (120.0, 6.0), (230.0, 7.0), (240.0, 50.0), (250.0, 8.0), (490.0, 9.0),
                     (250.0, 99.0)]:  # the last: not newer, ignored
        rows = cols.set_many(["a"], ["b"], {"p95": np.array([p95]), "end": np.array([end])}, rows)
    h = cols.history(rows)[0]
    assert h[-3:].tolist() == [7.0, 8.0, 9.0] and np.isnan(h[:-3]).all()
    assert cols.hist_count[rows[0]] == 3 and cols.hist_end[rows[0]] == 490.0 and cols.hist_first[rows[0]] == 10.0
    # seeding puts in only steps before the first held one: ends 0-239 are step 0, held already
    added = cols.seed([("a", "b")], np.array([[-480.0, -250.0, 100.0]]), np.array([[1.0, 2.0, 3.0]]))
    assert added == 2 and cols.history(rows)[0][-5:].tolist() == [1.0, 2.0, 7.0, 8.0, 9.0]
    # step 0: every newer window is a step (the replay: one window per epoch)
    every = PathColumns()
    r = every.set_many(["a"], ["b"], {"p95": np.array([1.0]), "end": np.array([10.0])})
    every.set_many(["a"], ["b"], {"p95": np.array([2.0]), "end": np.array([20.0])}, r)
    assert every.history(r)[0][-2:].tolist() == [1.0, 2.0]


def test_a_shifted_path_carries_its_ratio_to_the_task_and_names_the_trigger():
    now = time.time()
    s = make_scheduler([gpu_node(n, now) for n in ("n0", "n1")],
                       {(n, "store"): {"rtt_ms": win(now, 10.0)} for n in ("n0", "n1")})
    s.net.columns()  # the worker's columns exist from its first decision on; windows after it are remembered
    rng = np.random.default_rng(0)
    last = PathColumns.HISTORY + 2  # a full memory: n0's path jumps 1.3x for the last two windows, n1's stays
    for i in range(1, last + 1):
        for n in ("n0", "n1"):
            p95 = 10.0 + rng.normal(0, 0.05) + (3.0 if n == "n0" and i > last - 2 else 0.0)
            s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(now + 10 * i, p95)}})
    s.touch()
    nodes = s.nodes(now + 10 * last)
    net = s.network(["store"], nodes, "bandwidth")
    shift = net.shift[0, [nodes.index["n0"], nodes.index["n1"]]]
    assert 1.25 < shift[0] < 1.35 and shift[1] == 0.0
    # the placement rule (1.5x for a sensitive task) sees nothing; the detector (1.15x) does
    alpha = np.array([0.2])
    assert not degraded(np.array([13.0]), np.array([10.0]), np.array([0.0]), DEFAULT_POLICY, alpha)[0]
    assert degraded(np.array([13.0]), np.array([10.0]), np.array([0.0]), DEFAULT_POLICY, alpha, shift=shift[:1])[0]
    # a stable task (inference, 1.5x) lets a 1.3x shift pass; detector off: the seeds' rule only
    assert not degraded(np.array([13.0]), np.array([10.0]), np.array([0.0]), DEFAULT_POLICY, np.array([0.8]),
                        shift=shift[:1])[0]
    assert not degraded(np.array([13.0]), np.array([10.0]), np.array([0.0]), ReschedulePolicy(detector=False), alpha,
                        shift=shift[:1])[0]
