"""Expected completion time, in seconds: the currency placements are decided in (issue 52).

A placement of a task on a node (or a gang's set of nodes) is worth what the task will wait, load and
run there, plus a price on the capacity it holds meanwhile:

- ``wait``: 0 if it starts now, else until the nodes free (the running tasks' expected ends);
- ``load``: ``data_gb x 8 / B`` over the measured path from the data's endpoint (core.scoring.load_seconds);
- ``run``: the task's work on those cards and paths, the performance model of core.jobperf: its
  expected duration is read as on the pool's slowest card in one rack; the computing share runs
  ``speed`` times faster on faster cards (the slowest member counts), the communicating share ``c``
  scales with the ring all-reduce time over the members' worst pair RTT and narrowest pair bandwidth
  against the same in one rack;
- ``price x cards x (load + run)``: the card-seconds the placement holds, priced at what they cost the
  queue (:func:`queue_price`): while ``Q`` tasks wait for ``C`` cards, a card-second held delays the
  queue's drain by ``1 / C`` s for each of them — ``Q / C`` seconds of others' completion per
  card-second, zero when nothing waits. One rule for a light and a loaded cluster; no tuned constant.

``c`` of a training task is :data:`TRAINING_COMM_SHARE` (measured, below) unless it is learned;
other kinds exchange nothing between workers. Arrays in, arrays out.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from core.jobperf import PerfModel, job_time

# The median over the six models Pollux measured (Qiao et al., OSDI 2021; ../shared/data/models/pollux,
# placements.csv) of each model's median share of a step spent synchronising gradients on placements of
# several nodes: bert 0.60, cifar10 0.26, deepspeech2 0.25, imagenet 0.19, ncf 0.71, yolov3 0.64.
# tests/core/test_ect.py recomputes it from the data when the data is there.
TRAINING_COMM_SHARE = 0.43

# Costs closer than this share are equal: below what the inputs resolve (limits are rounded to round
# values, probe windows spread by a few per cent). Among equals the fuller node wins (best fit).
EQUAL_SHARE = 0.02

ONE_RACK = PerfModel()  # the reference placement a duration is read on: 0.05 ms, 100 Gbit/s


def card_speed(work_tflops: np.ndarray, cards: np.ndarray, has_accel: np.ndarray) -> np.ndarray:
    """float64[N]: each node's per-card compute against the slowest accelerator card of the pool (1 for
    that card, for a node without cards and where the capability is unknown). Worked: capabilities
    [5280, 7920, 0] TFLOPS over [8, 8, 0] cards -> [1.0, 1.5, 1.0]."""
    cards = np.asarray(cards, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(cards > 0, np.asarray(work_tflops, np.float64) / cards, np.nan)
    ok = np.asarray(has_accel, bool) & np.isfinite(per) & (per > 0)
    if not ok.any():
        return np.ones(per.shape)
    return np.where(ok, per / per[ok].min(), 1.0)


def queue_price(waiting: int, cards: float) -> float:
    """Seconds of the queue's completion one card-second costs: waiting tasks / cards (0 if none wait).
    Worked: 100 tasks waiting for 1,024 cards -> 0.0977."""
    return float(waiting) / float(cards) if waiting > 0 and cards > 0 else 0.0


def run_seconds(work_s, speed, comm_share, n_nodes, worst_rtt_ms, narrowest_gbps,
                model: PerfModel = ONE_RACK) -> np.ndarray:
    """float64[...]: the run time of ``work_s`` (seconds on the slowest card in one rack) on cards
    ``speed`` times as fast, over paths of ``worst_rtt_ms`` and ``narrowest_gbps`` (core.jobperf.job_time,
    no data). Worked in tests/core/test_ect.py."""
    work, comm, n, rtt, gbps, spd = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (
        work_s, comm_share, n_nodes, worst_rtt_ms, narrowest_gbps, speed)))
    return job_time(work, comm, n, rtt, gbps, np.zeros(work.shape), np.ones(work.shape), model, speed=spd)


def sets_run_seconds(work_s: float, speed: np.ndarray, comm_share: float, n_nodes: int, worst_rtt_ms: np.ndarray,
                     narrowest_gbps: np.ndarray, model: PerfModel = ONE_RACK) -> np.ndarray:
    """:func:`run_seconds` of one task on K candidate sets of ``n_nodes`` members (``speed``,
    ``worst_rtt_ms``, ``narrowest_gbps``: float64[K]), compiled: the same values bit for bit (core.jobperf's
    operations in its order), in one call instead of some twenty array operations per costing."""
    k = np.asarray(speed).shape[0]

    def column(v) -> np.ndarray:  # a fresh writable float64[K]: one compiled signature, whatever is passed
        return np.array(np.broadcast_to(np.asarray(v, np.float64), (k,)), np.float64)

    return _sets_run(float(work_s), column(speed), float(comm_share), float(n_nodes), column(worst_rtt_ms),
                     column(narrowest_gbps), float(model.grad_gb), float(model.ideal_rtt_ms), float(model.ideal_gbps))


@nb.njit(cache=True, error_model="numpy")
def _allreduce(n, rtt, gbps, grad):  # pragma: no cover - compiled (core.jobperf.allreduce_s of one set)
    if not n > 1:
        return 0.0
    return 2 * (n - 1) * rtt / 1000.0 + 2 * (n - 1) / n * grad * 8.0 / gbps


@nb.njit(cache=True, error_model="numpy")
def _sets_run(work, speed, comm, n, rtt, gbps, grad, ideal_rtt, ideal_gbps):  # pragma: no cover - compiled
    out = np.empty(speed.shape[0])
    a_ideal = _allreduce(n, ideal_rtt, ideal_gbps, grad)
    c = comm if n > 1 else 0.0
    for i in range(speed.shape[0]):
        out[i] = _run(work, speed[i], c, _allreduce(n, rtt[i], gbps[i], grad), a_ideal)
    return out


@nb.njit(cache=True, error_model="numpy")
def _run(work, speed, comm, allreduce, allreduce_ideal):  # pragma: no cover - compiled
    """core.jobperf.job_time of one set, no data: its compute on ``speed``, its communication share
    scaled by its all-reduce against one rack's (the formula both compiled costings share)."""
    scale = allreduce / allreduce_ideal if allreduce_ideal > 0 else 1.0
    return work * ((1 - comm) / speed + comm * scale) + 0.0  # job_time's load: none


def sets_costs(work_s: float, speed: np.ndarray, load_s: np.ndarray, strands: np.ndarray, sets: np.ndarray,
               comm_share: float, worst_rtt_ms, narrowest_gbps, wait_s, cards: float, price: float,
               model: PerfModel = ONE_RACK) -> tuple[np.ndarray, np.ndarray]:
    """(cost, stranded), float64[K] each, of one task on K candidate sets of members (``sets`` int64[K, g]
    node rows; ``speed``, ``load_s``, ``strands``: float64[N] per node): each set's run on its slowest
    member's cards over its paths (:func:`sets_run_seconds`), the load of its slowest-loading member,
    their :func:`cost` after waiting ``wait_s`` (float64[K]); and what the members strand of the queue
    (``strands`` summed by numpy) times the time the set is held, 0 where nothing is. Compiled: bit
    for bit the array form, in one pass over the sets instead of a dozen array operations per costing."""
    sets = np.ascontiguousarray(sets, np.int64)
    k = sets.shape[0]

    def column(v) -> np.ndarray:
        v = np.asarray(v, np.float64)
        return np.full(k, float(v)) if v.ndim == 0 else np.array(np.broadcast_to(v, (k,)), np.float64)

    return _sets_costs(float(work_s), np.ascontiguousarray(speed, np.float64), np.ascontiguousarray(load_s, np.float64),
                       np.asarray(strands, np.float64)[sets].sum(axis=1), sets, float(comm_share), column(worst_rtt_ms),
                       column(narrowest_gbps), column(wait_s), float(price) * float(cards), float(model.grad_gb),
                       float(model.ideal_rtt_ms), float(model.ideal_gbps))


@nb.njit(cache=True, error_model="numpy")
def _sets_costs(work, speed, load, strand_sums, sets, comm, rtt, gbps, wait, priced, grad, ideal_rtt,
                ideal_gbps):  # pragma: no cover - compiled (tested against the array form)
    k, g = sets.shape
    cost, stranded = np.empty(k), np.empty(k)
    n = float(g)
    a_ideal = _allreduce(n, ideal_rtt, ideal_gbps, grad)
    c = comm if n > 1 else 0.0
    for i in range(k):
        spd, ld = speed[sets[i, 0]], load[sets[i, 0]]
        for m in range(g):  # numpy's min and max: NaN wins
            v, w = speed[sets[i, m]], load[sets[i, m]]
            if not np.isnan(spd) and (np.isnan(v) or v < spd):
                spd = v
            if not np.isnan(ld) and (np.isnan(w) or w > ld):
                ld = w
        held = ld + _run(work, spd, c, _allreduce(n, rtt[i], gbps[i], grad), a_ideal)
        stranded[i] = strand_sums[i] * held if strand_sums[i] > 0 else 0.0
        cost[i] = np.inf if np.isinf(held) else (wait[i] + held) + priced * held
    return cost, stranded


def cost(wait_s, load_s, run_s, cards, price: float) -> np.ndarray:
    """float64[...]: ``wait + load + run + price x cards x (load + run)`` (see the module); infinite
    where the load or the run is (a set whose members cannot reach each other), whatever the price."""
    held = np.asarray(load_s, np.float64) + np.asarray(run_s, np.float64)
    endless = np.isinf(held)
    finite = np.where(endless, 0.0, held)
    return np.where(endless, np.inf, np.asarray(wait_s, np.float64) + finite + price * np.asarray(cards, np.float64)
                    * finite)


def single_order(costs: np.ndarray, left: np.ndarray, stock: np.ndarray, k: int | None = None) -> np.ndarray:
    """int64[k]: the nodes of finite cost, best first: those within :data:`EQUAL_SHARE` of the least
    cost first, among them the fewest cards ``left`` after the task (best fit), then the rack with the
    fewest fitting nodes ``stock`` (whole racks stay for gangs), then cost, then index; every other node
    after them by cost, then index. ``k``: only the first ``k`` of that order (one compiled pass, no
    sort: what a placement reads first). Worked: costs [100, 101, 150], left [6, 2, 0], stock [1, 1, 1]
    -> [1, 0, 2]."""
    costs = np.asarray(costs, np.float64)
    if k is not None:
        return _single_top(costs, np.asarray(left, np.float64), np.asarray(stock, np.float64), int(k))
    ok = np.flatnonzero(np.isfinite(costs))
    if not ok.size:
        return ok
    c = costs[ok]
    tier = c <= c.min() * (1 + EQUAL_SHARE) + 1e-9
    left_ok = np.where(tier, np.asarray(left, np.float64)[ok], 0.0)
    stock_ok = np.where(tier, np.asarray(stock, np.float64)[ok], 0.0)
    return ok[np.lexsort((ok, c, stock_ok, left_ok, ~tier))]


@nb.njit(cache=True)
def _single_top(costs, left, stock, k):  # pragma: no cover - compiled (tested against single_order)
    low = np.inf
    for c in costs:
        if np.isfinite(c) and c < low:
            low = c
    low = low * (1 + EQUAL_SHARE) + 1e-9
    keys = np.empty((k, 4))  # (not in the tier, left or 0, stock or 0, cost), then the index
    idx = np.empty(k, np.int64)
    m = 0
    for i in range(costs.shape[0]):
        c = costs[i]
        if not np.isfinite(c):
            continue
        far = c > low
        key = (1.0 if far else 0.0, 0.0 if far else left[i], 0.0 if far else stock[i], c)
        j = m if m < k else k
        while j > 0 and (keys[j - 1, 0], keys[j - 1, 1], keys[j - 1, 2], keys[j - 1, 3]) > key:
            j -= 1  # an equal key at a higher index ranks after the ones kept
        if j >= k:
            continue
        last = m if m < k else k - 1
        for q in range(last, j, -1):
            keys[q] = keys[q - 1]
            idx[q] = idx[q - 1]
        keys[j, 0], keys[j, 1], keys[j, 2], keys[j, 3] = key
        idx[j] = i
        m = min(m + 1, k)
    return idx[:m]


def single_costs(load_s: np.ndarray, run_s: np.ndarray, strands: np.ndarray, ok: np.ndarray, usable: np.ndarray,
                 need: np.ndarray, rack: np.ndarray, cards: float, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(cost float64[N], stock float64[N]) of a one-node task on each node, compiled in one pass: the
    :func:`cost` of starting now (``load_s`` + ``run_s``, priced) plus what it ``strands`` of the queue
    times its time held, infinite where the node is not ``ok`` or its ``usable`` (float[N, R]) does not
    cover ``need`` (float[R]); and, for each node, the nodes that fit in its ``rack`` (codes ≥ 0):
    :func:`single_order`'s inputs, bit for bit what the array form computes (the tests hold both)."""
    usable = np.asarray(usable)
    return _single_costs(np.ascontiguousarray(load_s, np.float64), np.ascontiguousarray(run_s, np.float64),
                         np.ascontiguousarray(strands, np.float64), np.ascontiguousarray(ok, np.bool_),
                         np.ascontiguousarray(usable, np.float64), np.asarray(need, np.float64).copy(),
                         np.ascontiguousarray(rack, np.int64), int(rack.max(initial=-1)) + 1,
                         float(price) * float(cards))


@nb.njit(cache=True, error_model="numpy")
def _single_costs(load, run, strands, ok, usable, need, rack, n_racks, priced):  # pragma: no cover - compiled
    n = load.shape[0]
    costs = np.full(n, np.inf)
    count = np.zeros(max(n_racks, 1))
    fits = np.zeros(n, np.bool_)
    for i in range(n):
        if not ok[i]:
            continue
        f = True
        for r in range(need.shape[0]):
            if not usable[i, r] >= need[r]:
                f = False
        if not f:
            continue
        fits[i] = True
        count[rack[i]] += 1
        costs[i] = _held_cost(load[i] + run[i], strands[i], priced)
    stock = np.empty(n)
    for i in range(n):
        stock[i] = count[rack[i]]
    return costs, stock


def single_best(load_s: np.ndarray, work_s: float, speed: np.ndarray, strands: np.ndarray, ok: np.ndarray,
                usable: np.ndarray, need: np.ndarray, rack: np.ndarray, cards: float, price: float) -> int:
    """The node a one-node task takes when every node would take it: the first of :func:`single_order`
    over :func:`single_costs` with its run ``work_s / speed`` on each node and the cards each leaves
    (``usable[:, 0] - need[0]``, in their own precision), in one compiled call; -1 when none fits."""
    usable = np.ascontiguousarray(usable)
    return int(_single_best(np.ascontiguousarray(load_s, np.float64), float(work_s),
                            np.ascontiguousarray(speed, np.float64), np.ascontiguousarray(strands, np.float64),
                            np.ascontiguousarray(ok, np.bool_), usable, np.ascontiguousarray(need),
                            np.ascontiguousarray(rack, np.int64), int(rack.max(initial=-1)) + 1,
                            float(price) * float(cards)))


@nb.njit(cache=True, error_model="numpy")
def _single_best(load, work, speed, strands, ok, usable, need, rack, n_racks, priced):  # pragma: no cover - compiled
    # _single_costs then _single_top(k=1), fused in one pass over the nodes without branches on their
    # data (they mispredicted on about half the nodes); the nodes near the least cost so far are
    # noted as it goes (the final tier is among them: the least only falls), then read again
    n = load.shape[0]
    count = np.zeros(max(n_racks, 1))
    low = np.inf
    near = np.empty(n, np.int64)  # written as far as nodes are noted: a few
    m = 0
    for i in range(n):
        fit, c = _single_cost(load, work, speed, strands, ok, usable, need, priced, i)
        count[rack[i]] += fit
        low = c if c < low else low
        near[m] = i
        m += c <= low * (1 + EQUAL_SHARE) + 1e-9 and c < np.inf
    low = low * (1 + EQUAL_SHARE) + 1e-9
    # the first of single_order: in the tier, the fewest cards left, then the least stocked rack,
    # then cost, then index
    best, key = -1, (0.0, 0.0, 0.0)
    for q in range(m):
        i = near[q]
        c = _single_cost(load, work, speed, strands, ok, usable, need, priced, i)[1]
        if c <= low:
            k = (usable[i, 0] - need[0] + 0.0, count[rack[i]], c)
            if best < 0 or k < key:  # an equal key at a higher index ranks after
                best, key = i, k
    return best


@nb.njit(cache=True, error_model="numpy", inline="always")
def _single_cost(load, work, speed, strands, ok, usable, need, priced, i):  # pragma: no cover - compiled
    """(whether node ``i`` is ok and fits, _single_costs' cost there: inf where it does not fit, NaN or
    inf where its load or run is endless — never below a finite cost, never read as one)."""
    fit = ok[i]
    for r in range(need.shape[0]):
        fit &= usable[i, r] >= need[r]
    c = _held_cost(load[i] + work / speed[i], strands[i], priced)
    return fit, c if fit else np.inf


_MAX_FLOAT = float(np.finfo(np.float64).max)


@nb.njit(cache=True, inline="always")
def _held_cost(held, strand, priced):  # pragma: no cover - compiled
    """A one-node task's cost for a node it holds ``held`` seconds (load + run): :func:`cost` of
    starting now, ``priced`` the queue's price times its cards, plus what it strands of the queue
    times that hold — one formula for _single_costs and _single_cost, without a branch (the price
    times the hold, bounded by the largest float: no 0 x inf where the queue is empty). An endless
    hold costs inf, or NaN where nothing is stranded (0 x inf), as the array form gives it."""
    return ((0.0 + held) + priced * min(held, _MAX_FLOAT)) + strand * held


def sooner_loads(best: np.ndarray, gbps: np.ndarray, source: np.ndarray, k: int, wait_s: float, data_gb: float,
                 bw: np.ndarray) -> None:
    """In place, over the nodes: where loading ``data_gb`` over ``bw`` (Gbit/s to each node; 0 or NaN:
    no path) after ``wait_s`` ends sooner than ``best`` (s), that time into ``best``, the rate into
    ``gbps`` and ``k`` into ``source`` — one source of a task's load folded in (seconds.Costing),
    compiled: ``wait + data_gb x 8 / bw`` as core.scoring.load_seconds computes it."""
    _sooner_loads(best, gbps, source, int(k), float(wait_s), float(data_gb), np.ascontiguousarray(bw, np.float64))


@nb.njit(cache=True)
def _sooner_loads(best, gbps, source, k, wait, gb, bw):  # pragma: no cover - compiled (tested against arrays)
    for i in range(best.shape[0]):
        secs = wait + (gb * 8.0 / bw[i] if bw[i] > 0 else np.inf)
        if secs < best[i]:
            best[i], gbps[i], source[i] = secs, bw[i], k


def booked_left(bandwidth: np.ndarray, per_rack: np.ndarray, node_rack: np.ndarray, floor: float) -> np.ndarray:
    """float64[N]: what is left of each node's ``bandwidth`` (float[N]) with ``per_rack[node_rack]``
    booked on it (a node without a rack, code -1: nothing), at least ``floor`` of it — elementwise
    ``max(bw - booked, floor x bw)`` in float64, compiled in one pass (the scheduler's bandwidth.left of
    booked_from, bit for bit)."""
    return _booked_left(np.ascontiguousarray(bandwidth), np.ascontiguousarray(per_rack, np.float64),
                        np.ascontiguousarray(node_rack, np.int64), float(floor))


@nb.njit(cache=True)
def _booked_left(bw, per, node_rack, floor):  # pragma: no cover - compiled (tested against the arrays)
    out = np.empty(bw.shape[0])
    for i in range(bw.shape[0]):
        b = np.float64(bw[i])
        r = node_rack[i]
        booked = per[r] if r >= 0 else 0.0
        out[i] = max(b - booked, floor * b)  # both NaN or neither (floor > 0)
    return out


def members_paths(rtt_ms: np.ndarray, gbps: np.ndarray, unknown_rtt_ms: float) -> tuple:
    """(worst pair RTT ms, narrowest pair Gbit/s) over a gang's members: ``rtt_ms[..., i, j]`` and
    ``gbps[..., i, j]`` from member i to member j (NaN RTT: not measured, taken as ``unknown_rtt_ms``;
    leading axes: candidate sets, each its own); a member to itself is not a pair. One member: (0, inf).
    Floats for one set ([g, g]), float64[K] arrays for [K, g, g]."""
    rtt = np.asarray(rtt_ms, np.float64)
    k = rtt.shape[-1]
    lead = rtt.shape[:-2]
    if k < 2:
        worst, narrow = np.zeros(lead), np.full(lead, np.inf)
    else:
        off = ~np.eye(k, dtype=bool)
        worst = np.where(np.isnan(rtt), unknown_rtt_ms, rtt)[..., off].max(axis=-1)
        narrow = np.asarray(gbps, np.float64)[..., off].min(axis=-1)
    return (float(worst), float(narrow)) if not lead else (worst, narrow)


def left_here(run_here_s, ran_s, min_share: float) -> np.ndarray:
    """float64[...]: what is left of a run expected to take ``run_here_s`` where it is, having run
    ``ran_s`` — at least ``min_share`` of it (a task past its estimate is not done). Worked: 1,000 s
    here, 400 run, share 0.1 -> 600; 1,000 here, 1,200 run -> 100."""
    run = np.asarray(run_here_s, np.float64)
    return np.maximum(run - np.asarray(ran_s, np.float64), min_share * run)


def move_gain(left_s, run_here_s, run_there_s, move_s, cards, price: float) -> tuple[np.ndarray, np.ndarray]:
    """(seconds a move saves, the saving it must exceed), float64[...] each, of a running task with
    ``left_s`` of its run left where it is (its run there ``run_here_s``) moving to a placement where
    the same run takes ``run_there_s``, the move costing ``move_s`` (checkpoint, transfer, restore,
    load again, queueing) during which it holds ``cards``. Saved: ``left x (1 - there / here)``, the
    same work at the other rate. Required: the move's own time, plus the queue's price on the
    card-seconds it holds meanwhile (``price x cards x move``), plus :data:`EQUAL_SHARE` of what is
    left (a saving within it is none: the estimates resolve no finer). It moves when saved > required.
    Worked: 10,000 s left here, runs 1.5x faster there (20,000 s against 13,333 s), move 300 s, 8 cards,
    price 0.05: saved 3,333.3 s, required 300 + 0.05 x 8 x 300 + 200 = 620 s -> it moves."""
    left = np.asarray(left_s, np.float64)
    here, there = np.asarray(run_here_s, np.float64), np.asarray(run_there_s, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        saved = np.where(here > 0, left * (1.0 - there / here), 0.0)
    move = np.asarray(move_s, np.float64)
    required = move + price * np.asarray(cards, np.float64) * move + EQUAL_SHARE * left
    return np.where(np.isfinite(saved), saved, -np.inf), required
