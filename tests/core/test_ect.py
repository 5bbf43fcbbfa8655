"""core.ect: the completion time in seconds, against worked examples written out by hand."""

from __future__ import annotations

import csv
import statistics

import numpy as np
import pytest

from core.ect import (
    EQUAL_SHARE,
    TRAINING_COMM_SHARE,
    card_speed,
    cost,
    members_paths,
    queue_price,
    run_seconds,
    sets_costs,
    sets_run_seconds,
    single_best,
    single_costs,
    single_order,
    sooner_loads,
)
from tests.helpers.data import DATA, needs_data

POLLUX = DATA / "models" / "pollux"


def test_card_speed_against_the_slowest_card():
    # 660 and 990 TFLOPS a card (5,280 and 7,920 over 8 cards); a node without cards counts 1
    assert card_speed([5280.0, 7920.0, 0.0], [8, 8, 0], [True, True, False]).tolist() == [1.0, 1.5, 1.0]
    assert card_speed([np.nan, 100.0], [8, 4], [True, True]).tolist() == [1.0, 1.0]  # unknown: 1
    assert card_speed([], [], []).size == 0


def test_queue_price_is_waiting_tasks_per_card():
    assert queue_price(100, 1024) == pytest.approx(100 / 1024)
    assert queue_price(0, 1024) == 0.0
    assert queue_price(5, 0) == 0.0


def test_run_seconds_worked():
    # one node: the work on cards 1.5x as fast, whatever the paths
    assert run_seconds(3600.0, 1.5, 0.43, 1, 80.0, 6.0).item() == pytest.approx(2400.0)
    # two nodes 80 ms and 6 Gbit/s apart: all-reduce 2 x 0.08 + 1 x 8 / 6 = 1.49333 s a step against
    # 2 x 0.00005 + 8 / 100 = 0.0801 s in one rack: 18.6433x; 3600 x (0.57 / 1.5 + 0.43 x 18.6433)
    a, a0 = 0.16 + 8 / 6, 0.0001 + 0.08
    want = 3600 * (0.57 / 1.5 + 0.43 * a / a0)
    assert run_seconds(3600.0, 1.5, 0.43, 2, 80.0, 6.0).item() == pytest.approx(want)
    assert want == pytest.approx(30227.9, abs=0.1)
    # in one rack: the ideal, computing share faster
    assert run_seconds(3600.0, 1.0, 0.43, 2, 0.05, 100.0).item() == pytest.approx(3600.0)
    # vectorised over candidates
    got = run_seconds(3600.0, np.array([1.0, 1.5]), 0.0, 1, 0.0, np.inf)
    assert got.tolist() == pytest.approx([3600.0, 2400.0])


@pytest.mark.parametrize("n_nodes", [1, 2, 4])
def test_sets_run_seconds_is_run_seconds_bit_for_bit(n_nodes):
    """The compiled costing of K sets against the plain one (core.jobperf's arrays): random paths with
    zero, infinite and NaN RTTs and bandwidths, speeds 1-2, each share, no sets at all."""
    rng = np.random.default_rng(n_nodes)
    k = 200
    rtt = rng.choice([0.0, 0.05, 3.7, 80.0, np.inf, np.nan], k) * rng.uniform(0.5, 2, k)
    gbps = rng.choice([0.0, 0.4, 6.0, 100.0, np.inf, np.nan], k) * rng.uniform(0.5, 2, k)
    speed = rng.uniform(1.0, 2.0, k)
    for comm in (0.0, TRAINING_COMM_SHARE, 0.9):
        with np.errstate(invalid="ignore"):  # 0 x inf in the plain one, as in the compiled
            want = run_seconds(3600.0, speed, comm, n_nodes, rtt, gbps)
        np.testing.assert_array_equal(sets_run_seconds(3600.0, speed, comm, n_nodes, rtt, gbps), want)
    # scalars for every set (a floor: no latency, no bound), and none
    np.testing.assert_array_equal(sets_run_seconds(7200.0, speed, 0.43, n_nodes, 0.0, np.inf),
                                  run_seconds(7200.0, speed, 0.43, n_nodes, np.zeros(k), np.full(k, np.inf)))
    assert sets_run_seconds(7200.0, np.zeros(0), 0.43, n_nodes, np.zeros(0), np.zeros(0)).shape == (0,)
    # the worked two-node example above
    if n_nodes == 2:
        want = 3600 * (0.57 / 1.5 + 0.43 * (0.16 + 8 / 6) / (0.0001 + 0.08))
        assert sets_run_seconds(3600.0, np.array([1.5]), 0.43, 2, np.array([80.0]), np.array([6.0]))[0] == \
            pytest.approx(want)


@pytest.mark.parametrize("g", [1, 2, 4, 8, 13, 40, 130, 300])
def test_sets_costs_are_the_array_forms(g):
    """The compiled costing of a gang's candidate sets against the array form it replaces (the
    slowest member's speed, the slowest-loading member's load, numpy's sum of what the members strand,
    core.ect.cost): NaN, infinite and zero loads, paths and speeds, sizes past numpy's pairwise blocks
    (8 and 128 members: numpy sums in blocks), no price and a price."""
    rng = np.random.default_rng(g)
    n, k = 400, 60
    speed = rng.uniform(1.0, 2.0, n)
    speed[rng.random(n) < 0.01] = np.nan
    load = rng.choice([0.0, 12.5, 400.0, np.inf, np.nan], n, p=[0.3, 0.3, 0.3, 0.05, 0.05]) * rng.uniform(0.5, 2, n)
    strands = np.where(rng.random(n) < 0.3, rng.uniform(0, 3, n) * 10.0 ** rng.uniform(-3, 3, n), 0.0)
    sets = np.stack([rng.choice(n, g, replace=False) for _ in range(k)])
    rtt = rng.choice([0.0, 0.05, 3.7, 80.0, np.inf, np.nan], k)
    gbps = rng.choice([0.0, 0.4, 6.0, 100.0, np.inf], k)
    wait = np.where(rng.random(k) < 0.5, 0.0, rng.uniform(0, 5000, k))
    for comm, price in ((0.0, 0.0), (TRAINING_COMM_SHARE, 0.0977)):
        with np.errstate(invalid="ignore"):
            run = sets_run_seconds(3600.0, speed[sets].min(axis=1), comm, g, rtt, gbps)
            ld, st = load[sets].max(axis=1), strands[sets].sum(axis=1)
            want = cost(wait, ld, run, 8.0 * g, price), np.where(st > 0, st * (ld + run), 0.0)
        got = sets_costs(3600.0, speed, load, strands, sets, comm, rtt, gbps, wait, 8.0 * g, price)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # worked: two members (speeds 1.5 and 2, loads 40 and 10 s, stranding 0.5 and 0) in one rack's
    # paths, starting in 100 s, 16 cards at 0.05 a card-second: the run 3,600 x (0.57 / 1.5 + 0.43)
    if g == 2:
        c, s = sets_costs(3600.0, np.array([1.5, 2.0]), np.array([40.0, 10.0]), np.array([0.5, 0.0]),
                          np.array([[0, 1]]), 0.43, 0.05, 100.0, np.array([100.0]), 16.0, 0.05)
        held = 40 + 3600 * (0.57 / 1.5 + 0.43)
        assert c[0] == pytest.approx(100 + held + 0.05 * 16 * held) and s[0] == pytest.approx(0.5 * held)


@pytest.mark.parametrize("seed", range(8))
def test_single_costs_are_the_array_forms(seed):
    """The compiled one-node costs against the array form they replace (cost, covers, a bincount of the
    fitting nodes per rack): unreachable and NaN loads, nodes not ok or too full, stranding, no price."""
    from core.feasibility import covers

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    load = rng.choice([0.0, 12.5, 400.0, np.inf, np.nan], n) * rng.uniform(0.5, 2, n)
    run = 3600.0 / rng.uniform(1.0, 2.0, n)
    strands = np.where(rng.random(n) < 0.3, rng.uniform(0, 3, n), 0.0)
    ok = rng.random(n) < 0.8
    usable = rng.integers(0, 9, (n, 3)).astype(np.float32)
    need = np.array([4, 2, 1], np.float32)
    rack = rng.integers(0, 12, n)
    price = [0.0, 0.0977][seed % 2]
    with np.errstate(invalid="ignore"):  # 0 x inf where nothing is stranded on an unreachable node
        want = cost(0.0, load, run, 8.0, price) + strands * (load + run)
    fits = ok & covers(usable, need)
    want = np.where(fits, want, np.inf)
    got, stock = single_costs(load, run, strands, ok, usable, need, rack, 8.0, price)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(stock, np.bincount(rack[fits], minlength=12)[rack])
    # worked: one node, 40 s load, 2,400 s run, 8 cards at 0.05 a card-second, 0.5 stranded
    got, stock = single_costs(np.array([40.0]), np.array([2400.0]), np.array([0.5]), np.array([True]),
                              np.array([[8.0, 80.0, 100.0]]), need, np.array([0]), 8.0, 0.05)
    assert got[0] == pytest.approx(2440 + 0.05 * 8 * 2440 + 0.5 * 2440) and stock[0] == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_single_best_is_the_first_of_the_order(dtype):
    """The one compiled call against the steps it fuses (the run on each node, single_costs, the cards
    left, single_order's first): many ties on cost, fit and rack stock, nodes too full or not ok,
    unreachable loads, no node at all."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(0, 80))
        load = rng.choice([0.0, 10.0, np.inf], n)
        speed = rng.choice([1.0, 1.5, 2.0], n)
        strands = np.where(rng.random(n) < 0.2, rng.choice([0.5, 1.0], n), 0.0)
        ok = rng.random(n) < 0.9
        usable = rng.choice([0.0, 2.0, 4.0, 8.0, 5.5], (n, 3)).astype(dtype)
        need = np.array([2.0, 1.0, 1.0], dtype)
        rack = rng.integers(0, 6, n)
        price = (0.0, 0.05)[trial % 2]
        costs, stock = single_costs(load, 3600.0 / speed, strands, ok, usable, need, rack, 2.0, price)
        want = single_order(costs, usable[:, 0] - need[0], stock, 1)
        got = single_best(load, 3600.0, speed, strands, ok, usable, need, rack, 2.0, price)
        assert got == (int(want[0]) if want.size else -1), trial
    # worked: equal costs; node 1 is left with fewer cards (best fit) and wins over node 0
    assert single_best(np.zeros(2), 100.0, np.ones(2), np.zeros(2), np.ones(2, bool),
                       np.array([[8.0, 9, 9], [4.0, 9, 9]], dtype), np.array([2.0, 1, 1], dtype),
                       np.array([0, 1]), 2.0, 0.0) == 1


def test_sooner_loads_is_the_array_fold():
    """Each source folded in against the array form it replaces (load_seconds where the path has
    bandwidth, kept where strictly sooner): no path (0, NaN), ties, a copy that is ready later."""
    from core.scoring import load_seconds

    rng = np.random.default_rng(2)
    n = 500
    best, gbps, src = np.full(n, np.inf), np.zeros(n), np.zeros(n, np.int64)
    want = best.copy(), gbps.copy(), src.copy()
    for k, wait in enumerate((0.0, 30.0, 0.0, 7.5)):
        bw = rng.choice([0.0, np.nan, 0.8, 5.0, 40.0, 100.0], n)
        sooner_loads(best, gbps, src, k, wait, 200.0, bw)
        with np.errstate(divide="ignore", invalid="ignore"):
            secs = wait + np.where(bw > 0, load_seconds(200.0, bw), np.inf)
        better = secs < want[0]
        want[1][better], want[2][better] = bw[better], k
        want = (np.where(better, secs, want[0]), want[1], want[2])
        np.testing.assert_array_equal(best, want[0])
        np.testing.assert_array_equal(gbps, want[1])
        np.testing.assert_array_equal(src, want[2])
    # worked: 100 GB over 10 Gbit/s is 80 s; a copy ready in 30 s over 40 Gbit/s ends at 50 s and wins
    best, gbps, src = np.full(1, np.inf), np.zeros(1), np.zeros(1, np.int64)
    sooner_loads(best, gbps, src, 0, 0.0, 100.0, np.array([10.0]))
    sooner_loads(best, gbps, src, 1, 30.0, 100.0, np.array([40.0]))
    assert (best[0], gbps[0], src[0]) == (50.0, 40.0, 1)


def test_cost_prices_the_card_seconds_held():
    # waits 100 s, loads 40 s, runs 2,400 s on 16 cards while 64 tasks wait for 1,024 cards
    price = queue_price(64, 1024)
    assert cost(100.0, 40.0, 2400.0, 16, price) == pytest.approx(100 + 40 + 2400 + 0.0625 * 16 * 2440)
    assert cost(100.0, 40.0, 2400.0, 16, 0.0) == pytest.approx(2540.0)


def test_single_order_best_fit_among_equals():
    assert single_order([100.0, 101.0, 150.0], [6, 2, 0], [1, 1, 1]).tolist() == [1, 0, 2]
    # beyond EQUAL_SHARE the cheaper wins whatever it leaves
    far = 100.0 * (1 + EQUAL_SHARE) + 1
    assert single_order([100.0, far], [7, 0], [1, 1]).tolist() == [0, 1]
    # equal cost and fit: the rack with fewer fitting nodes, then the lower index
    assert single_order([50.0, 50.0, 50.0], [0, 0, 0], [4, 1, 4]).tolist() == [1, 0, 2]
    # infeasible (inf, nan) nodes are left out; nothing feasible: empty
    assert single_order([np.inf, 3.0, np.nan], [0, 0, 0], [1, 1, 1]).tolist() == [1]
    assert single_order([np.inf], [0], [0]).size == 0
    assert single_order([100.0, 101.0, 150.0], [6, 2, 0], [1, 1, 1], 2).tolist() == [1, 0]
    assert single_order([np.nan, np.inf], [0, 0], [1, 1], 3).size == 0
    assert single_order(np.zeros(0), np.zeros(0), np.zeros(0), 3).size == 0


def test_single_order_against_a_plain_sort():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        c = rng.choice([10.0, 10.1, 10.3, 20.0, np.inf], n)
        left = rng.integers(0, 4, n)
        stock = rng.integers(1, 4, n)
        ok = [i for i in range(n) if np.isfinite(c[i])]
        if not ok:
            assert single_order(c, left, stock).size == 0
            continue
        low = min(c[i] for i in ok) * (1 + EQUAL_SHARE) + 1e-9
        tier = sorted((i for i in ok if c[i] <= low), key=lambda i: (left[i], stock[i], c[i], i))
        rest = sorted((i for i in ok if c[i] > low), key=lambda i: (c[i], i))
        assert single_order(c, left, stock).tolist() == tier + rest
        for k in (1, 2, 5, 20):  # the compiled first k: the same order's head
            assert single_order(c, left, stock, k).tolist() == (tier + rest)[:k]


def test_members_paths():
    rtt = np.array([[np.nan, 0.2, 80.0], [0.2, np.nan, np.nan], [80.0, 75.0, np.nan]])
    gbps = np.array([[np.inf, 100.0, 6.0], [100.0, np.inf, 8.0], [6.0, 8.0, np.inf]])
    assert members_paths(rtt, gbps, 90.0) == (90.0, 6.0)  # the unmeasured 1 -> 2 at 90
    assert members_paths(rtt[:2, :2], gbps[:2, :2], 90.0) == (0.2, 100.0)
    assert members_paths(rtt[:1, :1], gbps[:1, :1], 90.0) == (0.0, float("inf"))


@needs_data
def test_training_comm_share_is_pollux_median():
    """The prior is what the measurements say: each model's median sync share on several nodes, then
    the median over models."""
    shares = []
    for model in sorted(p for p in POLLUX.iterdir() if (p / "placements.csv").is_file()):
        with open(model / "placements.csv") as f:
            rows = [r for r in csv.DictReader(f) if len(r["placement"]) > 1 and float(r["step_time"]) > 0]
        shares.append(statistics.median(float(r["sync_time"]) / float(r["step_time"]) for r in rows))
    assert len(shares) == 6
    assert round(statistics.median(shares), 2) == TRAINING_COMM_SHARE


def test_left_here_and_move_gain_worked_examples():
    from core.ect import left_here, move_gain

    assert left_here(1000.0, 400.0, 0.1) == 600.0 and left_here(1000.0, 1200.0, 0.1) == 100.0
    saved, required = move_gain(10_000.0, 20_000.0, 20_000.0 / 1.5, 300.0, 8, 0.05)
    assert saved == pytest.approx(10_000.0 / 3) and required == pytest.approx(300 + 0.05 * 8 * 300 + 200)
    saved, _ = move_gain(10_000.0, 20_000.0, 25_000.0, 300.0, 8, 0.0)  # slower there: a negative saving
    assert saved == pytest.approx(-2500.0)
    saved, _ = move_gain(10_000.0, 20_000.0, np.inf, 300.0, 8, 0.0)  # no path there
    assert saved == -np.inf
