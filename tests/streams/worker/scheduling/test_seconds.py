"""The seconds rule (the default placement, streams/worker/scheduling/seconds.py): a placement's cost is
its expected wait + load + run, plus the queue's price on the card-seconds it holds; numbers by hand."""

import math

import pytest

from core.ect import TRAINING_COMM_SHARE, run_seconds
from core.quality import TCP_WINDOW_BYTES
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0


def cluster(racks: bool = False):
    """n0 <-> n1 and n2 <-> n3 are close (0.5 ms); every other pair is 150 ms apart."""
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {(a, b): {"rtt_ms": win(NOW, 0.5 if {a, b} in ({"n0", "n1"}, {"n2", "n3"}) else 150.0)}
             for a in nodes for b in nodes if a != b}
    extra = (lambda n: {"rack": "r0" if n in ("n0", "n1") else "r1"}) if racks else (lambda n: {})
    s = make_scheduler([gpu_node(n, NOW, **extra(n)) for n in nodes], paths)
    s.node_timeout_s, s.freshness = math.inf, None
    assert s.placement_rule == "seconds"
    return s


def task(tid, peers=1, cards=8, duration=3600.0, **kw):
    return Task(id=tid, type="training-data-parallel", peers=peers, resources={"cards": cards},
                submitted_at=NOW, expected_duration_s=duration, **kw)


def far_pair_run(duration: float) -> float:
    """A pair 150 ms apart: all-reduce 2 x 0.15 + 8 / B, B the window bound 64 MiB x 8 / 0.15 s (below
    the 400 Gbit/s links), against 2 x 0.00005 + 8 / 100 in one rack."""
    b = TCP_WINDOW_BYTES * 8 / 0.15 / 1e9
    a, a0 = 0.3 + 8 / b, 0.0001 + 0.08
    return duration * ((1 - TRAINING_COMM_SHARE) + TRAINING_COMM_SHARE * a / a0)


@pytest.mark.parametrize("racks", [False, True])
# the boundary: waiting pays while (blocker - 10) + 2,448 < 51,046 (+2 % in favour of now), i.e. up to
# a blocker of about 47,600 s; around it the gang waits at 46,000 s and goes now at 49,500 s
@pytest.mark.parametrize("blocker_s", [3600.0, 46_000.0, 49_500.0, 400_000.0])
def test_a_gang_waits_exactly_when_the_close_pair_completes_sooner(blocker_s, racks):
    s = cluster(racks)
    for t, d in (("a", 3600.0), ("b", blocker_s), ("c", blocker_s)):
        s.decide(task(t, duration=d), NOW)
    assert sorted(n for r in s.running.values() for n in r.nodes) == ["n0", "n1", "n2"]
    s.end("a")  # free: n0 and n3, 150 ms apart; their partners n1 and n2 free when b and c end
    now_cost = far_pair_run(3600.0)
    assert now_cost == pytest.approx(run_seconds(3600.0, 1.0, TRAINING_COMM_SHARE, 2, 150.0,
                                                 TCP_WINDOW_BYTES * 8 / 0.15 / 1e9).item())
    # b's expected end, then the close pair's run: 0.5 ms and the 400 Gbit/s links, faster than the
    # one-rack reference (100 Gbit/s): 2 x 0.0005 + 8 / 400 = 0.021 s a step (nothing else waits: no price)
    close = 3600.0 * ((1 - TRAINING_COMM_SHARE) + TRAINING_COMM_SHARE * 0.021 / 0.0801)
    later_cost = (blocker_s - 10) + close
    d = s.decide(task("g", peers=2), NOW + 10)
    if now_cost > later_cost * 1.02:  # e.g. 6,048 s against 51,046 s: it waits for n0 + n1
        assert blocker_s < 47_600
        assert d.status == "unschedulable" and "g" in s.pending
        (why,) = [f.reason for f in d.fallbacks if f.reason.startswith("waiting for a closer gang")]
        assert f"frees in {blocker_s - 10:.0f} s; expected {later_cost:.0f} s" in why
        assert blocker_s != 3600.0 or round(later_cost) == 6048
        assert ("rack:r0" if racks else "n0, n1") in why
        assert f"against {now_cost:.0f} s now" in why
        s.end("b")
        (placed,) = s.retry_pending(NOW + 60)
        assert sorted(placed.nodes) == ["n0", "n1"] and placed.expected_completion_s == pytest.approx(close, abs=1e-3)
    else:  # 49,500 s or more of waiting: the far pair now completes first
        assert blocker_s > 47_600
        assert d.status == "placed" and sorted(d.nodes) == ["n0", "n3"]
        assert d.expected_completion_s == pytest.approx(now_cost, abs=1e-3)
    s.placement_rule = "points"  # the points rule says nothing of seconds
    assert s.decide(task("p", cards=1), NOW + 70).expected_completion_s is None


def test_a_single_goes_to_the_faster_card_then_best_fit():
    s = make_scheduler([gpu_node("slow", NOW), gpu_node("fast", NOW, fp16=1500.0), gpu_node("fast2", NOW, fp16=1500.0)],
                       {})
    s.node_timeout_s = math.inf
    a = s.decide(task("a", cards=4), NOW)
    assert a.nodes == ["fast"] and a.expected_completion_s == 2400.0  # 2,400 s against 3,600 s; ties: lower id
    assert s.decide(task("b", cards=2), NOW).nodes == ["fast"]  # as fast, fuller (best fit)
    assert s.decide(task("c", cards=4), NOW).nodes == ["fast2"]  # fast has 2 cards left


def test_a_load_over_a_slow_path_costs_its_seconds():
    # 2,000 GB from a store 100 ms from n0 (window bound 5.4 Gbit/s: 2,980 s) and 1 ms from n1 (400 Gbit/s
    # links, window 537 Gbit/s: 40 s); n0's cards are 1.5x faster: 3,600 / 1.5 = 2,400 s of run
    s = make_scheduler([gpu_node("n0", NOW, fp16=1500.0), gpu_node("n1", NOW)],
                       {("n0", "store"): {"rtt_ms": win(NOW, 100.0)}, ("n1", "store"): {"rtt_ms": win(NOW, 1.0)}})
    s.node_timeout_s, s.freshness = math.inf, None
    big = dict(data_source={"node": "store", "size_gb": 2000.0})
    # n0: 2,980 + 2,400 = 5,380 s; n1: 40 + 3,600 = 3,640 s
    assert s.decide(task("a", **big), NOW).nodes == ["n1"]
    s.end("a")
    # with 200 GB: n0 298 + 2,400 = 2,698 s against n1 4 + 3,600 s
    assert s.decide(task("b", data_source={"node": "store", "size_gb": 200.0}), NOW).nodes == ["n0"]


def test_a_task_waiting_for_a_whole_node_keeps_it_whole():
    """Stranding: a two-card task on the empty fast node would leave the queued whole-node task no
    node; it goes to the half-full slow one instead when what it saves does not pay for the wait."""
    def half_full(queued: bool):
        s = make_scheduler([gpu_node("n0", NOW, fp16=2000.0), gpu_node("n1", NOW)], {})
        s.node_timeout_s, s.freshness = math.inf, None
        assert s.decide(task("a", duration=36_000.0), NOW).nodes == ["n0"]
        assert s.decide(task("b", cards=4), NOW).nodes == ["n1"]
        if queued:
            assert s.decide(task("q"), NOW).status == "unschedulable" and "q" in s.pending
        s.end("a")
        return s

    # nothing waits: 1,800 s on n0 against 3,600 s on n1
    assert half_full(False).decide(task("c", cards=2), NOW + 1).nodes == ["n0"]
    # q waits for a whole node, n0 the only one: n0 costs 1,800 + 1 x 1,800 (q waits for it) plus the
    # price (1 task for 16 cards x 2 cards x 1,800 s) = 3,825; n1 3,600 + 450 = 4,050 - within 2 %? no:
    # n0 wins on cost though it strands q... unless the stranding is counted: it is, so n0 = 3,825 and
    # n1 = 4,050: the fast node still pays for itself by more than the queue loses
    s = half_full(True)
    assert s.decide(task("c", cards=2), NOW + 1).nodes == ["n0"]
    # the same with cards only as fast on n0 as the stranding costs: a one-hour task on equal cards
    s = make_scheduler([gpu_node("n0", NOW), gpu_node("n1", NOW)], {})
    s.node_timeout_s, s.freshness = math.inf, None
    s.decide(task("a"), NOW)
    s.decide(task("b", cards=4), NOW)
    assert s.decide(task("q"), NOW).status == "unschedulable"
    s.end("a")  # n0 empty, n1 half full: equal cards, so n0 costs its stranding more: n1
    assert s.decide(task("c", cards=2), NOW + 1).nodes == ["n1"]
    assert [d.nodes for d in s.retry_pending(NOW + 2)] == [["n0"]]


def racked(n_racks: int, fast_rack: int):
    """``n_racks`` racks of two nodes, 0.05 ms inside a rack and 0.2 ms between racks; the nodes of
    ``fast_rack`` have cards 1.5x as fast."""
    names = [(f"n{r}-{i}", f"r{r}") for r in range(n_racks) for i in range(2)]
    paths = {(f"rack:{a}", f"rack:{b}"): {"rtt_ms": win(NOW, 0.05 if a == b else 0.2)}
             for a in {r for _, r in names} for b in {r for _, r in names}}
    s = make_scheduler([gpu_node(n, NOW, fp16=1500.0 if r == f"r{fast_rack}" else 1000.0, rack=r) for n, r in names],
                       paths)
    s.node_timeout_s, s.freshness = math.inf, None
    return s


@pytest.mark.parametrize("fast_rack", [0, 17, 39])
def test_a_gang_among_many_racks_goes_to_the_fast_rack_whatever_the_shortlist(fast_rack, monkeypatch):
    # 40 racks: more sets than the shortlist measures; the fast rack's set is the least cost as if in
    # one rack (2,400 s of run against 3,600), so the shortlist keeps it and it wins
    from streams.worker.scheduling import seconds

    got = racked(40, fast_rack).decide(task("g", peers=2), NOW)
    assert sorted(got.nodes) == [f"n{fast_rack}-0", f"n{fast_rack}-1"]
    monkeypatch.setattr(seconds, "SHORTLIST", 10_000)  # every set measured: the same choice
    assert racked(40, fast_rack).decide(task("g", peers=2), NOW).nodes == got.nodes


def test_a_gang_waiting_for_a_closer_set_holds_it_against_work_behind():
    """Issue 52: a gang that could start now but waits for a closer set was never the head of the queue,
    so it held no reservation, and work behind it took the set's nodes as they freed. Now it holds that
    set from when it frees: behind it, what would not end by then is kept off; what would, may go."""
    s = cluster(racks=True)
    for t, d in (("a", 3600.0), ("b", 3600.0), ("c", 3600.0)):
        s.decide(task(t, duration=d), NOW)
    s.end("a")  # free: n0 and n3 (150 ms apart); n1 (its rack-mate) frees when b ends at +3,600
    assert s.decide(task("g", peers=2), NOW + 10).status == "unschedulable"  # waits for n0 + n1
    assert s.retry_pending(NOW + 20) == []
    r = s.reservation
    assert (r.task_id, sorted(r.nodes), r.start) == ("g", ["n0", "n1"], NOW + 3600)
    # a long one-node task behind it takes n3, the next finds only n0 (held for g) and waits, saying so
    assert s.decide(task("x", duration=7200.0), NOW + 21).nodes == ["n3"]
    y = s.decide(task("y", duration=7200.0), NOW + 22)
    assert y.status == "unschedulable" and y.rejected["n0"] == "reserved_for_queue_head"
    # a short one that ends before n1 frees may use n0 meanwhile (backfill)
    assert s.decide(task("z", duration=1000.0), NOW + 23).nodes == ["n0"]
    s.end("b")
    s.end("z")
    (placed,) = s.retry_pending(NOW + 3600)
    assert placed.task_id == "g" and sorted(placed.nodes) == ["n0", "n1"]


@pytest.mark.parametrize("seed", range(5))
def test_a_sets_floor_is_never_above_its_cost(seed):
    """Costing.floor (a set's cost with its paths instant) bounds every set's cost from below, so a later
    set whose floor loses to the best set now is rightly never costed over its paths: random sets of
    2-4 members of a cluster with near and far pairs, random waits, the queue priced."""
    import numpy as np

    from streams.adapters.tasks import endpoints
    from streams.worker.scheduling.seconds import Costing

    rng = np.random.default_rng(seed)
    s = cluster(racks=bool(seed % 2))
    for k in range(3):  # the first takes every card, the others wait: the queue puts a price on cards
        s.decide(task(f"q{k}", peers=4, cards=8), NOW)
    assert len(s.pending) == 2
    nodes = s.nodes(NOW)
    for g in (2, 3, 4):
        t = task(f"f{g}", peers=g, duration=float(rng.uniform(60, 90_000)))
        c = Costing(s, t, s.network(endpoints([t]), nodes, s._profile(t)), nodes, NOW)
        assert c.price > 0
        sets = np.array([rng.choice(len(nodes.ids), g, replace=False) for _ in range(20)], np.int64)
        waits = rng.uniform(0, 50_000, len(sets))
        floor, full = c.floor(sets, waits), c.of_sets(sets, waits)[0]
        assert (floor <= full + 1e-9).all() and (floor < full).any()


def test_later_sets_are_every_group_s_first_nodes_that_free_after_now():
    """later_sets against its plain form (each rack's, then each site's g nodes that free first, by
    core.groups' reference, kept where the last of them frees after now): groups with enough nodes
    free now, with too few nodes at all, nodes that never free; and a worked case."""
    import numpy as np

    from core.groups import group_firsts_reference
    from streams.worker.scheduling.gang_sets import later_sets

    rng = np.random.default_rng(4)
    for trial in range(200):
        n, g = int(rng.integers(1, 60)), int(rng.integers(1, 5))
        free_at = rng.choice([NOW, NOW, NOW + 10, NOW + 500, math.inf], n)
        rack = rng.integers(0, 8, n)
        site = rack // 3
        ok = np.flatnonzero(np.isfinite(free_at))
        sets = np.concatenate([group_firsts_reference(ok, lv, free_at[None, :], g) for lv in (rack, site)])
        start = free_at[sets[:, -1]] if len(sets) else np.zeros(0)
        got_start, got_sets = later_sets(free_at, g, rack, site, NOW)
        assert got_sets.tolist() == sets[start > NOW].tolist(), trial
        assert got_start.tolist() == start[start > NOW].tolist()
    # worked: rack 0 has two nodes free now (a gang of 2 starts there now: no later set); rack 1 has
    # one free now and one at +500, its set starts at +500; site 0 (both racks) holds 3 free now
    free_at = np.array([NOW, NOW, NOW, NOW + 500, math.inf])
    start, sets = later_sets(free_at, 2, np.array([0, 0, 1, 1, 1]), np.array([0, 0, 0, 0, 0]), NOW)
    assert sets.tolist() == [[2, 3]] and start.tolist() == [NOW + 500]


def test_now_sets_against_their_plain_form():
    """now_sets without measured paths against a plain sort: the pool's first g fitting nodes (most
    stocked site, then rack, faster cards, best fit, index), then each site's and each rack's first g
    (core.groups' reference) — in one site and in several, with many ties; none when fewer fit."""
    import numpy as np

    from core.groups import group_firsts_reference
    from streams.worker.scheduling.gang_sets import now_sets

    rng = np.random.default_rng(8)
    for trial in range(300):
        n, g = int(rng.integers(1, 50)), int(rng.integers(1, 5))
        rack = rng.integers(0, 6, n)
        site = rack // 3 if trial % 2 else np.zeros(n, np.int64)  # several sites, or one
        fits = rng.random(n) < 0.7
        speed, left = rng.choice([1.0, 2.0], n), rng.choice([0.0, 4.0], n)
        got = [np.atleast_2d(s).tolist() for s in now_sets(fits, g, rack, site, speed, left)]
        ok = np.flatnonzero(fits)
        if ok.size < g:
            assert got == [], trial
            continue
        r_stock = np.bincount(rack[ok], minlength=rack.max() + 1)[rack]
        s_stock = np.bincount(site[ok], minlength=site.max() + 1)[site]
        pool = ok[np.lexsort((ok, left[ok], -speed[ok], -r_stock[ok], -s_stock[ok]))][:g]
        want = [[pool.tolist()]]
        for level, keys in ((site, [-r_stock, -speed, left]), (rack, [-speed, left])):
            block = group_firsts_reference(ok, level, np.stack(keys).astype(float), g)
            if len(block):
                want.append(block.tolist())
        assert got == want, trial


def test_the_first_end_after_now_by_hand():
    """RunningBook.first_end_after: a: 3,600 s expected, placed at NOW, ends NOW + 3,600; b: 1,000 s,
    placed 400 s ago with 100 s run before, ends NOW + 500; c: 600 s, placed 700 s ago, overdue (ends
    now: it frees nothing later). At NOW the first later end is b's; once b ends, a's; none: inf."""
    s = cluster()
    for t, d, at in (("a", 3600.0, NOW), ("b", 1000.0, NOW - 400), ("c", 600.0, NOW - 700)):
        s.decide(task(t, duration=d), at)
    s.running["b"].ran_s = 100.0
    assert s.running.first_end_after(NOW) == NOW + 500
    s.end("b")
    assert s.running.first_end_after(NOW) == NOW + 3600
    s.end("a")
    s.end("c")
    assert s.running.first_end_after(NOW) == math.inf


@pytest.mark.parametrize("seed", range(4))
def test_no_later_set_costs_less_than_the_later_floor(seed):
    """Costing.later_floor(first end) bounds every later set's floor from below, so a gang whose best
    set now beats it is rightly never costed against later sets (the same decisions with the bound
    as without it): every later set (by free_times and later_sets, on a cluster some of whose nodes
    run tasks of random lengths) starts at or after the running tasks' first end, and its floor is at
    or above the bound; random sets waiting from that end on, too."""
    import numpy as np

    from streams.adapters.tasks import endpoints
    from streams.worker.scheduling.gang_sets import later_sets
    from streams.worker.scheduling.queue import free_times
    from streams.worker.scheduling.seconds import Costing

    rng = np.random.default_rng(seed)
    s = cluster(racks=bool(seed % 2))
    for k in range(3):
        s.decide(task(f"r{k}", duration=float(rng.uniform(600, 20_000))), NOW - float(rng.uniform(0, 500)))
    s.decide(task("q", peers=4), NOW)  # waits: the queue prices cards
    nodes, first = s.nodes(NOW), s.running.first_end_after(NOW)
    for g in (2, 3):
        t = task(f"f{g}", peers=g, duration=float(rng.uniform(60, 90_000)))
        c = Costing(s, t, s.network(endpoints([t]), nodes, s._profile(t)), nodes, NOW)
        bound = c.later_floor(first)
        assert math.isfinite(bound) and bound > first - NOW
        free_at = free_times(s, t, nodes, NOW, nodes.usable.copy())
        starts, sets = later_sets(free_at, g, c._codes("racks"), c._codes("sites"), NOW)
        assert len(sets) and starts.min() >= first
        assert (c.floor(sets, starts - NOW) >= bound).all()
        rand = np.array([rng.choice(len(nodes.ids), g, replace=False) for _ in range(20)], np.int64)
        assert (c.floor(rand, first - NOW + rng.uniform(0, 9_000, 20)) >= bound).all()
    assert c.later_floor(math.inf) == math.inf  # nothing running ends later: no later set at all
