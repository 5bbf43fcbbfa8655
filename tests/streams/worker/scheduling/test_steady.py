"""Quiet groups not scored again (scheduling.steady): the bounds are worked values, and a rescoring
that skips a quiet group does what scoring it in full does — the same moves at the same windows, the
same streaks and seen windows — over planted drifts and random walks, with the skip taken."""

import math

import numpy as np
import pytest

from core.quality import combine
from core.reschedule import DEFAULT_POLICY, log_drift, quality_drift, stays_quiet
from schemas.sched import Task
from streams.worker.scheduling import steady
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def test_quality_drift_worked_values():
    w = np.array([0.5, 0.5])
    assert quality_drift(np.array([[83.0, 40.0]]), np.array([[80.0, 40.0]]), w) == pytest.approx(1.5)
    # a dimension the path lacks: the other carries all the weight
    assert quality_drift(np.array([[83.0, np.nan]]), np.array([[80.0, np.nan]]), w) == pytest.approx(3.0)
    # which dimensions are known changed, or the paths: no bound
    assert quality_drift(np.array([[83.0, 1.0]]), np.array([[80.0, np.nan]]), w) == math.inf
    assert quality_drift(np.zeros((2, 2)), np.zeros((3, 2)), w) == math.inf
    assert quality_drift(np.zeros((0, 2)), np.zeros((0, 2)), w) == 0.0
    # a path with no dimension at all (quality NaN both times) moves nothing
    assert quality_drift(np.array([[np.nan, np.nan], [10.0, 20.0]]), np.array([[np.nan, np.nan], [10.0, 18.0]]),
                         w) == pytest.approx(1.0)


def test_quality_drift_bounds_what_combine_gives_on_random_paths():
    rng = np.random.default_rng(3)
    w = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
    for _ in range(200):
        ref = rng.uniform(0, 100, (50, 5))
        ref[rng.random((50, 5)) < 0.2] = np.nan
        now = np.clip(ref + rng.normal(0, rng.choice([0.01, 1.0, 10.0]), ref.shape), 0, 100)
        moved = np.abs(combine(now, w) - combine(ref, w))
        bound = quality_drift(now, ref, w)
        assert np.nanmax(moved) <= bound + 1e-9
        assert bound <= np.nanmax(np.abs(now - ref)) + 1e-9  # never more than the largest utility change


def test_log_drift_and_stays_quiet_worked_values():
    assert log_drift(np.array([12.5, np.nan]), np.array([10.0, np.nan])) == pytest.approx(math.log(1.25))
    assert log_drift(np.array([8.0, 1.0]), np.array([10.0, 1.0])) == pytest.approx(math.log(1.25))
    assert log_drift(np.array([1.0, 2.0]), np.array([1.0, np.nan])) == math.inf  # an RTT appeared
    assert log_drift(np.array([0.0]), np.array([1.0])) == math.inf  # no longer positive
    assert log_drift(np.zeros(0), np.zeros(0)) == 0.0
    # gap 6 and drift 1.9 against a minimum gain of 10: 6 + 2 x 1.901 = 9.802, quiet; drift 2: 10.002, not
    assert DEFAULT_POLICY.min_gain_points == 10.0
    assert stays_quiet(6.0, 1.9) and not stays_quiet(6.0, 2.0)
    assert stays_quiet(-math.inf, 1e6)  # no other node at all, and none may appear: the room only shrinks
    assert not stays_quiet(6.0, math.inf)


NODES = ["n0", "n1", "n2", "n3"]


T0 = 1.8e9


def _world(now):
    paths = {(n, "store"): {"rtt_ms": win(now, 20.0 + 5 * k)} for k, n in enumerate(NODES)}
    s = make_scheduler([gpu_node(n, now) for n in NODES], paths)
    s.node_timeout_s = math.inf  # the nodes' reports stay as they are: the view is rebuilt only if they change
    return s


def _task(k):
    return Task(id=f"t{k}", type="inference", resources={"cards": 2},
                data_source={"node": "store", "size_gb": 50}, alpha=0.3, expected_duration_s=1e6)


def _run(p95_at, windows, ends: dict | None = None):
    """Rescorings over ``windows`` windows, path p95s ``p95_at(k)`` (float[len(NODES)]) at window k
    (``ends``: window -> a task that ends then): the moves and each task's node, streak and seen
    window after every rescoring."""
    now = T0
    s = _world(now)
    for k in range(6):
        assert s.decide(_task(k), now).nodes
    log = []
    for k in range(1, windows + 1):
        end = now + 10 * k
        for n, p95 in zip(NODES, p95_at(k), strict=True):
            s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(end, float(p95))}})
        s.touch()
        if ends and k in ends:
            s.end(ends[k])
        events = s.reschedule(end + 1)
        log.append(([(e.task_id, e.from_nodes, e.to_nodes, e.trigger) for e in events],
                    sorted((r.task.id, tuple(r.nodes), r.streak, r.seen_window_end) for r in s.running.values())))
    return log


@pytest.fixture
def counted(monkeypatch):
    """steady.still_quiet and gang_still_quiet counted (calls, skips; gang_calls, gang_skips); ``off()``
    makes them never skip (every group and gang scored in full)."""
    seen = {"calls": 0, "skips": 0, "gang_calls": 0, "gang_skips": 0}

    def counting(name, prefix):
        real = getattr(steady, name)

        def wrapped(*a, **kw):
            got = real(*a, **kw)
            seen[prefix + "calls"] += 1
            seen[prefix + "skips"] += got
            return got

        monkeypatch.setattr(steady, name, wrapped)

    counting("still_quiet", "")
    counting("gang_still_quiet", "gang_")

    def off():
        monkeypatch.setattr(steady, "still_quiet", lambda *a, **kw: False)
        monkeypatch.setattr(steady, "gang_still_quiet", lambda *a, **kw: False)

    seen["off"] = off
    return seen


def test_a_slow_drift_is_followed_to_the_same_move_at_the_same_window(counted):
    # n3's path falls from 35 ms to 1 ms by 0.5 ms a window: each window moves scores by little, but
    # the drift adds up from the last full evaluation, so the move comes when full scoring makes it
    def p95_at(k):
        return np.array([20.0, 25.0, 30.0, max(35.0 - 0.5 * k, 1.0)])

    fast = _run(p95_at, 80)
    assert counted["skips"] > 10 and counted["skips"] < counted["calls"]
    counted["off"]()
    full = _run(p95_at, 80)
    assert fast == full
    moves = [w for w, (events, _) in enumerate(fast) if events]
    assert moves and any(e[2] == ["n3"] for w in moves for e in fast[w][0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_walks_give_the_full_evaluations_results(counted, seed):
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 0.02, (120, len(NODES)))
    jumps = rng.random(steps.shape) < 0.02
    steps[jumps] = rng.normal(0, 1.0, jumps.sum())  # now and then a reroute
    walk = np.array([20.0, 25.0, 30.0, 35.0]) * np.exp(np.cumsum(steps, axis=0))

    fast = _run(lambda k: walk[k - 1], 120)
    assert counted["skips"] > 0
    counted["off"]()
    assert fast == _run(lambda k: walk[k - 1], 120)


@pytest.mark.parametrize("seed", [3, 4])
def test_tasks_ending_leave_the_rest_of_a_quiet_group_quiet_as_full_scoring_finds_it(counted, monkeypatch, seed):
    # three of six tasks end along a random walk: the rest of the group is still skipped while quiet
    # (each task's gap is within the group's), and what happens is what scoring in full does
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 0.01, (90, len(NODES)))
    steps[rng.random(steps.shape) < 0.01] = 1.0  # now and then a path slows a lot
    walk = np.array([20.0, 25.0, 30.0, 35.0]) * np.exp(np.cumsum(steps, axis=0))
    ends = {20: "t1", 40: "t4", 60: "t2"}
    first = {}  # the group's size -> whether the first rescoring at that size skipped it
    real = steady.still_quiet

    def counting(sched, nodes, group, profile):
        got = real(sched, nodes, group, profile)
        first.setdefault(len(group), got)
        return got

    monkeypatch.setattr(steady, "still_quiet", counting)
    fast = _run(lambda k: walk[k - 1], 90, ends)
    # at the window a task ended, the rest is skipped on the evaluation kept for all (before: in full)
    assert sorted(first) == [3, 4, 5, 6] and sum(first[n] for n in (3, 4, 5)) >= 2
    counted["off"]()
    assert fast == _run(lambda k: walk[k - 1], 90, ends)


def test_room_given_back_is_scored_in_full(counted):
    # n3 has by far the best path but a blocker of another profile (another group) fills it; the
    # windows barely move (drift ~0), so the group stays quiet until the blocker ends: the room on n3
    # is then worth a move, which only scoring the group again finds
    def run():
        s = _world(T0)
        for n, p95 in zip(NODES, (40.0, 40.0, 40.0, 1.0), strict=True):
            s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(T0, p95)}})
        blocker = Task(id="b", type="inference", resources={"cards": 8}, data_source={"node": "store", "size_gb": 50},
                       expected_duration_s=1e6, network_profile="bandwidth")
        assert s.decide(blocker, T0).nodes == ["n3"]
        for k in range(3):
            assert s.decide(_task(k), T0).nodes != ["n3"]
        moves = []
        for k in range(1, 13):
            end = T0 + 10 * k
            for n, p95 in zip(NODES, (40.0, 40.0, 40.0, 1.0), strict=True):
                s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store",
                                                 "metrics": {"rtt_ms": win(end, p95 * (1 + 1e-6 * k))}})
            s.touch()
            if k == 6:
                s.end("b")
            moves += [(k, e.task_id, e.to_nodes) for e in s.reschedule(end + 1)]
        return moves

    fast = run()
    assert counted["skips"] > 0
    counted["off"]()
    assert fast == run()
    assert fast and 6 <= fast[0][0] <= 8 and fast[0][2] == ["n3"]  # once its patience allows


def test_room_back_no_task_could_gain_from_keeps_the_group_quiet(counted, monkeypatch):
    # every node's path alike: a blocker of another profile ending frees a node no better than the
    # tasks' own, so the group's gap over every node's capacity stays within the minimum gain
    after = []
    real = steady.still_quiet

    def counting(sched, nodes, group, profile):
        got = real(sched, nodes, group, profile)
        if "b" not in sched.running and profile != "bandwidth":
            after.append(got)
        return got

    def run():
        s = _world(T0)
        blocker = Task(id="b", type="inference", resources={"cards": 8}, data_source={"node": "store", "size_gb": 50},
                       expected_duration_s=1e6, network_profile="bandwidth")
        assert s.decide(blocker, T0).nodes
        for k in range(3):
            assert s.decide(_task(k), T0).nodes
        log = []
        for k in range(1, 13):
            end = T0 + 10 * k
            for n in NODES:
                s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store",
                                                 "metrics": {"rtt_ms": win(end, 30.0 * (1 + 1e-6 * k))}})
            s.touch()
            if k == 6:
                s.end("b")
            log.append(([(e.task_id, e.to_nodes) for e in s.reschedule(end + 1)],
                        sorted((r.task.id, tuple(r.nodes), r.streak, r.seen_window_end) for r in s.running.values())))
        return log

    monkeypatch.setattr(steady, "still_quiet", counting)
    fast = run()
    assert len(after) == 7 and all(after)  # windows 6-12, each skipped with room back (before: in full)
    counted["off"]()
    assert fast == run()


GANG_NODES = NODES + ["n4", "n5"]


def _gang_run(walk):
    """Two gangs of two over six nodes whose pairwise paths follow ``walk`` (float[K, pairs]): the
    moves, and each gang's nodes, streak and seen window after every rescoring."""
    nodes = GANG_NODES
    pairs = [(a, b) for a in nodes for b in nodes if a != b]
    s = make_scheduler([gpu_node(n, T0) for n in nodes],
                       {p: {"rtt_ms": win(T0, float(v))} for p, v in zip(pairs, walk[0], strict=True)})
    s.node_timeout_s = math.inf
    s.placement_rule = "points"  # the points rule's quiet gangs (moves in seconds: test_moves)
    for k in range(2):
        gang = Task(id=f"g{k}", type="training-data-parallel", resources={"cards": 8}, peers=2, alpha=0.3, expected_duration_s=1e6)
        assert len(s.decide(gang, T0).nodes) == 2
    log = []
    for k in range(1, len(walk)):
        end = T0 + 10 * k
        for (a, b), v in zip(pairs, walk[k], strict=True):
            s.net.put(f"{a}|{b}".encode(), {"src": a, "dst": b, "metrics": {"rtt_ms": win(end, float(v))}})
        s.touch()
        events = s.reschedule(end + 1)
        log.append(([(e.task_id, e.from_nodes, e.to_nodes, e.trigger) for e in events],
                    sorted((r.task.id, tuple(r.nodes), r.streak, r.seen_window_end) for r in s.running.values())))
    return log


@pytest.mark.parametrize("seed", [0, 1])
def test_gangs_skipped_while_quiet_give_the_full_evaluations_results(counted, seed):
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 0.01, (100, 30))
    jumps = rng.random(steps.shape) < 0.01
    steps[jumps] = rng.normal(0, 1.5, jumps.sum())  # now and then a path jumps
    walk = rng.uniform(0.5, 20.0, 30) * np.exp(np.cumsum(steps, axis=0))
    fast = _gang_run(walk)
    assert 0 < counted["gang_skips"] < counted["gang_calls"]
    counted["off"]()
    assert fast == _gang_run(walk)


def test_a_gangs_slowly_worsening_pair_moves_it_at_the_same_window(counted):
    # the gang's own pair (n0, n1) slows by 5 % a window from 0.5 ms; every other pair stays near 1 ms:
    # scores move little each window, and the move comes when full scoring makes it
    pairs = [(a, b) for a in GANG_NODES for b in GANG_NODES if a != b]
    own = np.array([{a, b} == {"n0", "n1"} for a, b in pairs])
    k = np.arange(120)[:, None]
    walk = np.where(own, 0.5 * 1.05 ** k, 1.0 * (1 + 0.001 * np.sin(k + np.arange(len(pairs)))))
    fast = _gang_run(walk)
    assert counted["gang_skips"] > 10
    counted["off"]()
    assert fast == _gang_run(walk)
    moved = [(w, e) for w, (events, _) in enumerate(fast) for e in events if e[0] == "g0"]
    assert moved and set(moved[0][1][1]) == {"n0", "n1"}


def test_a_node_leaving_the_view_sends_the_group_to_full_scoring(counted):
    # an idle node "a0" (sorted first, a slow path) leaves at window 5: every other node's row moves
    # down by one, so what a quiet evaluation kept of the rows no longer holds
    def run():
        s = _world(T0)
        s.inv.put(b"a0", gpu_node("a0", T0))
        s.net.put(b"a0|store", {"src": "a0", "dst": "store", "metrics": {"rtt_ms": win(T0, 250.0)}})
        whole = [Task(id=f"w{k}", type="inference", resources={"cards": 8}, alpha=0.3, expected_duration_s=1e6,
                      data_source={"node": "store", "size_gb": 50}) for k in range(4)]
        assert sorted(s.decide(t, T0).nodes[0] for t in whole) == NODES  # one a node: the last row taken
        log = []
        for k in range(1, 10):
            end = T0 + 10 * k
            for n, p95 in zip(NODES, (20.0, 25.0, 30.0, 35.0), strict=True):
                s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(end, p95)}})
            if k == 5:
                del s.inv.table[b"a0"]
                s.inv.invalidate()
            s.touch()
            log.append(([(e.task_id, e.to_nodes) for e in s.reschedule(end + 1)],
                        sorted((r.task.id, tuple(r.nodes), r.streak, r.seen_window_end) for r in s.running.values())))
        return log

    fast = run()
    assert counted["skips"] > 0
    counted["off"]()
    assert fast == run()


def _gang_with_blockers(fast_pair: float, ends: dict[int, str]):
    """A gang of two beside two whole-node blockers of another profile, which take the nodes with the
    best paths first (n4, n5: their pair at ``fast_pair`` ms, every other pair near 20 ms); a blocker
    ends at each window of ``ends``. The gang's moves, nodes, streak and seen window at every window."""
    pairs = [(a, b) for a in GANG_NODES for b in GANG_NODES if a != b]
    base = np.array([fast_pair if {a, b} == {"n4", "n5"} else 20.0 for a, b in pairs])
    s = make_scheduler([gpu_node(n, T0) for n in GANG_NODES],
                       {p: {"rtt_ms": win(T0, float(v))} for p, v in zip(pairs, base, strict=True)})
    s.node_timeout_s = math.inf
    # placed by the points rule: by the seconds rule the gang would wait for the blockers' fast pair
    # (1e6 s of wait + ~0.4e6 s there against ~2.4e6 s across 20 ms), and this is about moving it
    s.placement_rule = "points"
    for b in ("b0", "b1"):
        blocker = Task(id=b, type="inference", resources={"cards": 8}, expected_duration_s=1e6,
                       network_profile="bandwidth")
        took = s.decide(blocker, T0).nodes[0]
        assert fast_pair >= 20.0 or took in ("n4", "n5")
    gang = Task(id="g", type="training-data-parallel", resources={"cards": 8}, peers=2, alpha=0.3,
                expected_duration_s=1e6)
    assert len(s.decide(gang, T0).nodes) == 2
    log = []
    for k in range(1, 16):
        end = T0 + 10 * k
        for (a, b), v in zip(pairs, base * (1 + 1e-5 * np.sin(k + np.arange(len(pairs)))), strict=True):
            s.net.put(f"{a}|{b}".encode(), {"src": a, "dst": b, "metrics": {"rtt_ms": win(end, float(v))}})
        s.touch()
        if k in ends:
            s.end(ends[k])
        moves = [(e.task_id, e.to_nodes) for e in s.reschedule(end + 1)]
        g = s.running["g"]
        log.append((moves, tuple(g.nodes), g.streak, g.seen_window_end))
    return log


def test_room_back_elsewhere_keeps_a_quiet_gang_quiet(counted, monkeypatch):
    # every pair alike: a blocker ending frees a node no better than the gang's own, so the gang's
    # bound over every node's capacity stays within the minimum gain and it is not scored again
    skipped_after = []
    real = steady.gang_still_quiet

    def after_room_back(sched, nodes, r, saw):
        got = real(sched, nodes, r, saw)
        if "b0" not in sched.running:
            skipped_after.append(got)
        return got

    monkeypatch.setattr(steady, "gang_still_quiet", after_room_back)
    fast = _gang_with_blockers(20.0, {4: "b0"})
    assert len(skipped_after) == 12 and all(skipped_after)  # (before: room back meant scoring in full)
    counted["off"]()
    assert fast == _gang_with_blockers(20.0, {4: "b0"})


def test_room_back_a_gang_could_use_is_scored_and_moves_it_as_full_scoring_does(counted):
    # the blockers hold the pair with the best path (0.5 ms): once both end, the gang moves there, at
    # the window full scoring moves it
    fast = _gang_with_blockers(0.5, {4: "b0", 8: "b1"})
    assert counted["gang_skips"] > 0
    counted["off"]()
    assert fast == _gang_with_blockers(0.5, {4: "b0", 8: "b1"})
    assert any(moves and set(moves[0][1]) == {"n4", "n5"} for moves, *_ in fast)
