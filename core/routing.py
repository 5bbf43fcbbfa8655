"""Request routing for inference services (issue 54; the seeds' 算力路由): how each origin's requests
are split over a service's replicas so that they are answered soonest on the whole (pure: arrays in,
arrays out).

The model. Origin o sends ``lam[o]`` requests/s. Replica r serves ``mu[r]`` requests/s at full load.
A request from o answered by r takes its network delay ``delay[o, r]`` (the measured RTT from the
origin to the replica's site, s), the replica's price in seconds ``extra[r]`` (energy price x cost
sensitivity, 0 by default), and its time at the replica, an M/M/1 sojourn ``1 / (mu[r] - X[r])`` where
``X[r]`` is everything routed to r. The split ``x[o, r]`` minimises the total time

    sum_{o,r} x[o, r] (delay[o, r] + extra[r]) + sum_r X[r] / (mu[r] - X[r])

subject to ``sum_r x[o, r] = lam[o]`` and ``x >= 0``. It is convex; at its optimum every replica an
origin uses has the same marginal cost ``delay + extra + mu / (mu - X)^2`` and no replica it leaves out
is cheaper (Bell & Stidham, "Individual versus social optimization in the allocation of customers to
alternative servers", Management Science 1983; the flow-deviation method of Fratta, Gerla & Kleinrock,
Networks 1973). A replica that is cold (its model not loaded), unmeasured from the origin (NaN delay)
or of no capacity gets nothing from it; an origin no replica is open to gets nothing (its response
time NaN), and the others are split as if it were not there.

Solved by block coordinate descent over the origins (each step exact, the objective falls every
step): origin o's best split given the others' load ``Y`` is the water-filling
``x[o, r] = max(0, mu[r] - Y[r] - sqrt(mu[r] / (nu - a[r])))`` with ``a = delay[o] + extra`` and the
level ``nu`` found by bisection so the split sums to ``lam[o]``. Overloaded — the demand beyond
``max_util`` of the capacity open to it (every origin's requests then spread in proportion to the
capacity open to it), or the other origins leaving one too little room (its split stays as it was) —
:class:`Split` says so.

:func:`split` is the numba kernel; :func:`split_reference` is the same method in plain Python (the tests
hold them together and check the optimality conditions on worked examples).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

MAX_UTIL = 0.98  # a replica never planned beyond this share of its capacity (the queue's time explodes there)
HAPROXY_MAX_WEIGHT = 256  # weights HAProxy takes: 0..256


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # float64[O, R] requests/s from each origin to each replica
    response_s: np.ndarray  # float64[O] each origin's mean expected response time (NaN: nothing open to it)
    overloaded: bool  # the demand of the origins that reach a replica exceeds max_util of the capacity


def split(delay_s, lam, mu, warm, extra_s=None, max_util: float = MAX_UTIL, sweeps: int = 50,
          tol: float = 1e-7) -> Split:
    """The split of ``lam`` (float64[O] requests/s) over replicas of capacity ``mu`` (float64[R]),
    ``warm`` (bool[R]), reached over ``delay_s`` (float64[O, R], NaN: not measured); see the module."""
    d, lam, mu, open_ = _inputs(delay_s, lam, mu, warm)
    e = np.zeros(mu.size) if extra_s is None else np.asarray(extra_s, np.float64)
    x, over = _split_kernel(d, lam, mu, open_, e, float(max_util), int(sweeps), float(tol))
    return Split(x, _response(x, d, mu, e), bool(over))


def split_reference(delay_s, lam, mu, warm, extra_s=None, max_util: float = MAX_UTIL, sweeps: int = 50,
                    tol: float = 1e-7) -> Split:
    """:func:`split` in plain Python (what the kernel is tested against)."""
    d, lam, mu, open_ = _inputs(delay_s, lam, mu, warm)
    e = np.zeros(mu.size) if extra_s is None else np.asarray(extra_s, np.float64)
    n_o, n_r = d.shape
    x = np.zeros((n_o, n_r))
    reach = [[r for r in range(n_r) if open_[o, r]] for o in range(n_o)]
    cap = [sum(mu[r] for r in reach[o]) for o in range(n_o)]
    if sum(lam[o] for o in range(n_o) if reach[o]) > max_util * sum(mu[r] for r in range(n_r) if any(open_[:, r])):
        for o in range(n_o):
            for r in reach[o]:
                x[o, r] = lam[o] * mu[r] / cap[o]
        return Split(x, _response(x, d, mu, e), True)
    load, over = [0.0] * n_r, False
    for o in range(n_o):  # a first split: by capacity, then the sweeps improve it
        for r in reach[o]:
            x[o, r] = lam[o] * mu[r] / cap[o]
            load[r] += x[o, r]
    for _ in range(sweeps):
        moved = 0.0
        for o in range(n_o):
            if lam[o] <= 0 or not reach[o]:
                continue
            other = [load[r] - x[o, r] for r in range(n_r)]
            new = _reference_origin([d[o, r] + e[r] for r in range(n_r)], [max(mu[r] - other[r], 0.0) for r in range(n_r)],
                                    mu, reach[o], lam[o])
            if new is None:  # the others leave it too little room
                over = True
                continue
            for r in range(n_r):
                moved = max(moved, abs(new[r] - x[o, r]))
                x[o, r] = new[r]
            s = sum(x[o])
            for r in range(n_r):
                x[o, r] *= lam[o] / s
                load[r] = other[r] + x[o, r]
        if moved <= tol * max(1.0, float(np.max(lam, initial=0.0))):
            break
    return Split(x, _response(x, d, mu, e), over)


def _reference_origin(a: list, room: list, mu, reach: list, lam: float) -> list | None:
    """One origin's water-filling split (the reference's step): ``a[r]`` its delay + price at each
    replica, ``room[r]`` the capacity the other origins leave; None when that room cannot take ``lam``."""
    def total(nu: float) -> float:
        return sum(room[r] - math.sqrt(mu[r] / (nu - a[r])) for r in reach
                   if room[r] > 0 and nu > a[r] + mu[r] / (room[r] * room[r]))

    lo = min((a[r] + mu[r] / (room[r] * room[r]) for r in reach if room[r] > 0), default=math.inf)
    hi, k = lo + 1.0, 0
    while math.isfinite(lo) and total(hi) < lam and k < 60:
        hi, k = lo + 2 * (hi - lo), k + 1
    if not math.isfinite(lo) or total(hi) < lam:
        return None
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if total(mid) < lam:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return [room[r] - math.sqrt(mu[r] / (hi - a[r])) if r in reach and room[r] > 0 and hi > a[r] + mu[r] / (room[r] * room[r])
            else 0.0 for r in range(len(room))]


def weights(x: np.ndarray, scale: int = HAPROXY_MAX_WEIGHT) -> np.ndarray:
    """int64[O, R] load-balancer weights of a split: each origin's shares x ``scale``, rounded (a share
    the rounding takes to 0 stays at 1 — it was sent something —, a replica sent nothing gets 0)."""
    x = np.asarray(x, np.float64)
    total = x.sum(axis=1, keepdims=True)
    w = np.rint(np.divide(x, total, out=np.zeros_like(x), where=total > 0) * scale).astype(np.int64)
    return np.where((x > 0) & (w == 0), 1, w)


def _inputs(delay_s, lam, mu, warm):
    d = np.asarray(delay_s, np.float64)
    lam, mu = np.asarray(lam, np.float64), np.asarray(mu, np.float64)
    warm = np.asarray(warm, bool)
    if d.ndim != 2 or d.shape != (lam.size, mu.size) or warm.shape != mu.shape:
        raise ValueError(f"delay_s must be [origins, replicas] = [{lam.size}, {mu.size}], warm [{mu.size}]")
    if (lam < 0).any() or not np.isfinite(lam).all():
        raise ValueError("request rates must be finite and >= 0")
    open_ = np.isfinite(d) & (d >= 0) & warm[None, :] & (mu > 0)[None, :]
    return np.where(open_, d, 0.0), lam, np.where(mu > 0, mu, 0.0), open_


def _response(x, d, mu, e) -> np.ndarray:
    """float64[O] each origin's mean of delay + extra + 1 / (mu - X) over its requests."""
    load = x.sum(axis=0)
    wait = np.where(mu > load, 1.0 / np.maximum(mu - load, 1e-12), np.inf)
    per = np.where(x > 0, d + e[None, :] + wait[None, :], 0.0)
    lam = x.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lam > 0, (x * per).sum(axis=1) / lam, np.nan)


@nb.njit(cache=True)
def _split_kernel(d, lam, mu, open_, e, max_util, sweeps, tol):  # pragma: no cover - compiled (tested against the reference)
    n_o, n_r = d.shape
    x = np.zeros((n_o, n_r))
    cap = np.zeros(n_o)
    reachable = np.zeros(n_r, np.bool_)
    for o in range(n_o):
        for r in range(n_r):
            if open_[o, r]:
                cap[o] += mu[r]
                reachable[r] = True
    demand, capacity = 0.0, 0.0
    over = False
    for o in range(n_o):
        if cap[o] > 0:  # an origin nothing is open to gets nothing (its response: NaN)
            demand += lam[o]
    for r in range(n_r):
        if reachable[r]:
            capacity += mu[r]
    if demand > max_util * capacity:
        for o in range(n_o):
            for r in range(n_r):
                if open_[o, r]:
                    x[o, r] = lam[o] * mu[r] / cap[o]
        return x, True
    load = np.zeros(n_r)
    for o in range(n_o):
        for r in range(n_r):
            if open_[o, r]:
                x[o, r] = lam[o] * mu[r] / cap[o]
                load[r] += x[o, r]
    big = 1.0
    for o in range(n_o):
        big = max(big, lam[o])
    room = np.zeros(n_r)
    a = np.zeros(n_r)
    for _ in range(sweeps):
        moved = 0.0
        for o in range(n_o):
            if lam[o] <= 0 or cap[o] <= 0:
                continue
            lo = np.inf
            for r in range(n_r):
                room[r] = max(mu[r] - (load[r] - x[o, r]), 0.0)
                a[r] = d[o, r] + e[r]
                if open_[o, r] and room[r] > 0:
                    lo = min(lo, a[r] + mu[r] / (room[r] * room[r]))
            hi, k = lo + 1.0, 0
            while np.isfinite(lo) and _total(hi, o, open_, room, a, mu) < lam[o] and k < 60:
                hi, k = lo + 2 * (hi - lo), k + 1
            if not np.isfinite(lo) or _total(hi, o, open_, room, a, mu) < lam[o]:
                over = True  # the others leave it too little room
                continue
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if _total(mid, o, open_, room, a, mu) < lam[o]:
                    lo = mid
                else:
                    hi = mid
                if hi - lo <= 1e-13 * hi:
                    break
            s = 0.0
            for r in range(n_r):
                new = 0.0
                if open_[o, r] and room[r] > 0 and hi > a[r] + mu[r] / (room[r] * room[r]):
                    new = room[r] - math.sqrt(mu[r] / (hi - a[r]))
                moved = max(moved, abs(new - x[o, r]))
                load[r] += new - x[o, r]
                x[o, r] = new
                s += new
            for r in range(n_r):
                scaled = x[o, r] * lam[o] / s
                load[r] += scaled - x[o, r]
                x[o, r] = scaled
        if moved <= tol * big:
            break
    return x, over


@nb.njit(cache=True)
def _total(nu, o, open_, room, a, mu):  # pragma: no cover - compiled
    s = 0.0
    for r in range(room.size):
        if open_[o, r] and room[r] > 0 and nu > a[r] + mu[r] / (room[r] * room[r]):
            s += room[r] - math.sqrt(mu[r] / (nu - a[r]))
    return s
