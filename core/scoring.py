"""The joint scoring kernel: composite = alpha x compute + (1 - alpha) x network, every job x node.

Inputs are arrays (see :class:`ScoringInputs`); the output is float32[J, N] with -inf where the
node cannot take the job (unavailable, accelerator class not allowed, not enough free resources
once the safety margin is kept). Scores are 0..100.

Network score of job j on node n: the mean path quality (0..100) from n to the job's endpoints
(co-workers, data source, model repository; CSR lists), or the node's mean quality to its peers when
the job names no endpoint. Data location is a factor of its own: when the job loads ``data_gb`` from
its data endpoint, the load time over that path (``data_gb x 8 / bandwidth``) goes through a log
utility curve (``load_good_s`` -> 100, ``load_bad_s`` -> 0) and takes ``load_weight`` of the
composite: ``(1 - w) x (alpha x compute + (1 - alpha) x network) + w x load``. A 200 GB model behind
a slow path makes a poor candidate whatever the task's alpha (mixed into the network part it weighed
only (1 - alpha) x w, and an inference service still chose a 27-minute load). Jobs that need no accelerator and prefer plain nodes (preprocessing, batch
analytics) lose ``accel_penalty`` points on accelerator nodes.

The numba kernel runs in parallel over jobs; :func:`score_reference` is the plain numpy version the
tests compare it with. :func:`score_parts` also returns the network part it computed, so callers
never recover it by inverting the composite (wrong once the penalty or the clip applies).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass

import numba as nb
import numpy as np

from core.quality import UNKNOWN_QUALITY

# filter reasons (0 = feasible)
(FEASIBLE, UNAVAILABLE, CLASS_NOT_ALLOWED, NO_CARDS, NO_ACCEL_MEM, NO_HOST_MEM, TEAM_QUOTA, RESERVED,
 REGION_NOT_ALLOWED, TIER_NOT_ALLOWED, ANTI_AFFINITY, OTHER_RACK, CORDONED, OTHER_CLUSTER) = range(14)
REASONS = ("feasible", "unavailable", "accelerator_class_not_allowed", "insufficient_cards",
           "insufficient_accelerator_memory", "insufficient_host_memory", "team_quota_exceeded",
           "reserved_for_queue_head", "region_not_allowed", "tier_not_allowed", "anti_affinity",
           "outside_the_gangs_rack", "node_cordoned",  # node_cordoned: cordoned, draining or leaving
           "outside_the_gangs_cluster")  # a gang's workers in one workload manager's cluster (one Slurm)
NOTHING_FITS = 1 << 62  # class mask of a task whose allowed classes no node has (no class code reaches 62)


def class_mask(allowed_codes: list[int], restricted: bool) -> int:
    """A task's class mask: bit c set when class c is allowed; 0 when the task allows any class;
    NOTHING_FITS when it restricts classes and none of them is known."""
    if not restricted:
        return 0
    return sum(1 << c for c in allowed_codes) if allowed_codes else NOTHING_FITS


def evolved(x, **changes):
    """A dataclass instance with ``changes``: ``dataclasses.replace`` for classes without
    ``__post_init__`` or init-only fields (ScoringInputs, NodeView), as a shallow copy of its fields
    (replace runs ``__init__`` over every field: tens of microseconds, many times per rescoring)."""
    unknown = set(changes) - x.__dataclass_fields__.keys()
    if unknown:
        raise TypeError(f"{type(x).__name__} has no field {sorted(unknown)[0]!r}")
    new = object.__new__(type(x))
    new.__dict__.update(x.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass
class ScoringInputs:
    # nodes
    compute: np.ndarray  # float32[N, K] compute score per task class
    usable: np.ndarray  # float32[N, 3] free resources minus the safety margin
    available: np.ndarray  # bool[N]
    node_class: np.ndarray  # int64[N] accelerator class code (< 64)
    has_accel: np.ndarray  # bool[N]
    node_quality: np.ndarray  # float32[N] mean quality to peers (network score without endpoints)
    quality: np.ndarray  # float32[E, N] path quality endpoint e <-> node n (NaN: unknown)
    bandwidth_gbps: np.ndarray  # float32[E, N] usable path bandwidth
    # jobs
    kind: np.ndarray  # int64[J] column of ``compute``
    alpha: np.ndarray  # float32[J]
    need: np.ndarray  # float32[J, 3]
    class_mask: np.ndarray  # int64[J] bit c set: class c allowed; 0: any class
    ep_ptr: np.ndarray  # int64[J + 1]
    ep_idx: np.ndarray  # int64[M] endpoint rows of ``quality``
    data_ep: np.ndarray  # int64[J] endpoint loaded from, -1 none
    data_gb: np.ndarray  # float32[J]
    accel_penalty: np.ndarray  # float32[J]
    load_good_s: float = 60.0
    load_bad_s: float = 3600.0
    load_weight: float = 0.3  # share of the composite the data load time takes when a task loads data
    unknown_quality: float = UNKNOWN_QUALITY  # a path without data yet: neither good nor bad

    @property
    def n_jobs(self) -> int:
        return int(self.kind.shape[0])

    @property
    def n_nodes(self) -> int:
        return int(self.available.shape[0])


def _prepared(x: ScoringInputs):
    """Arrays laid out for the kernel (node attributes as rows over nodes, NaN qualities filled)."""
    f32 = np.float32

    unknown = f32(x.unknown_quality)
    quality = np.asarray(x.quality, f32)
    if np.isnan(quality).any():
        quality = np.where(np.isnan(quality), unknown, quality)
    node_quality = np.asarray(x.node_quality, f32)
    node_quality = np.where(np.isnan(node_quality), unknown, node_quality)
    with np.errstate(divide="ignore"):
        log_bw = np.log(np.maximum(np.asarray(x.bandwidth_gbps, f32), f32(1e-30)))
    return (
        np.ascontiguousarray(np.asarray(x.compute, f32).T),
        np.ascontiguousarray(np.asarray(x.usable, f32).T),
        np.ascontiguousarray(x.available, np.bool_), np.ascontiguousarray(x.node_class, np.int64),
        np.ascontiguousarray(x.has_accel, np.bool_), np.ascontiguousarray(node_quality),
        np.ascontiguousarray(quality), np.ascontiguousarray(log_bw, f32),
        np.ascontiguousarray(x.kind, np.int64), np.ascontiguousarray(x.alpha, f32),
        np.ascontiguousarray(x.need, f32), np.ascontiguousarray(x.class_mask, np.int64),
        np.ascontiguousarray(x.ep_ptr, np.int64), np.ascontiguousarray(x.ep_idx, np.int64),
        np.ascontiguousarray(x.data_ep, np.int64), np.ascontiguousarray(x.data_gb, f32),
        np.ascontiguousarray(x.accel_penalty, f32),
        f32(x.load_good_s), f32(x.load_bad_s), f32(x.load_weight),
    )


def score_all(x: ScoringInputs) -> np.ndarray:
    """float32[J, N]: composite of every job on every node, -inf where infeasible."""
    out = np.empty((x.n_jobs, x.n_nodes), dtype=np.float32)
    none = np.empty((0, 0), np.float32)
    _score_rows(out, none, False, none, False, *_prepared(x))
    return out


def score_parts(x: ScoringInputs, compute_only: bool = False) -> tuple[np.ndarray, ...]:
    """(composite, network), both float32[J, N]: the composite as :func:`score_all`, and the network
    score (0..100, before alpha, penalty and feasibility) the kernel mixed into it. The compute part
    is ``x.compute[:, x.kind[j]]``. ``compute_only``: also the composite at alpha 1 (the compute-only
    counterfactual: :func:`score_all` of the jobs at alpha 1, bit for bit), from the same pass."""
    out = np.empty((x.n_jobs, x.n_nodes), dtype=np.float32)
    net = np.empty((x.n_jobs, x.n_nodes), dtype=np.float32)
    co = np.empty((x.n_jobs, x.n_nodes) if compute_only else (0, 0), dtype=np.float32)
    _score_rows(out, net, True, co, compute_only, *_prepared(x))
    return (out, net, co) if compute_only else (out, net)


def _score_rows(out, net_out, want_net, co_out, want_co, *inputs):
    """The kernel, in parallel over jobs when the work is worth the threads (a small call — one
    decision on a small cluster — runs serially: starting the thread pool costs more than it saves).
    Its inputs are passed read-only, every one: numba compiles a read-only array apart from a writable
    one, and the scheduler's node view is read-only, so a kernel warmed on writable inputs was compiled
    again inside the first large burst (a fifth of `cnsched bench decide`'s time at 5,000 nodes)."""
    kernel = _score_rows_parallel if out.size >= PARALLEL_MIN_CELLS else _score_rows_serial
    kernel(out, net_out, want_net, co_out, want_co, *(_read_only(a) for a in inputs))


def _read_only(a):
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


PARALLEL_MIN_CELLS = 65_536


def _score_rows_impl(out, net_out, want_net, co_out, want_co, compute_t, usable_t, available, node_class, has_accel, node_quality, quality, log_bw,
                kind, alpha, need, class_mask, ep_ptr, ep_idx, data_ep, data_gb, accel_penalty,
                load_good_s, load_bad_s, load_weight):
    J, N = out.shape
    log_good = np.float32(math.log(load_good_s))
    log_span = np.float32(math.log(load_bad_s)) - log_good
    neg_inf = np.float32(-np.inf)
    zero = np.float32(0.0)
    hundred = np.float32(100.0)
    for j in nb.prange(J):
        row = out[j]
        e0 = ep_ptr[j]
        m = ep_ptr[j + 1] - e0
        # 1. network score: mean quality to the job's endpoints (or the node's own mean quality)
        if m == 0:
            for n in range(N):
                row[n] = node_quality[n]
        else:
            q0 = quality[ep_idx[e0]]
            for n in range(N):
                row[n] = q0[n]
            for t in range(1, m):
                qt = quality[ep_idx[e0 + t]]
                for n in range(N):
                    row[n] += qt[n]
            inv = np.float32(1.0 / m)
            for n in range(N):
                row[n] *= inv
        if want_net:
            for n in range(N):
                net_out[j, n] = row[n]
        # 2. the load time of the job's data over the path from its data endpoint: its own factor
        d = data_ep[j]
        gb = data_gb[j]
        loads = d >= 0 and gb > 0
        w = np.float32(load_weight) if loads else zero
        lu = np.zeros(N if loads else 0, np.float32)
        if loads:
            lb = np.float32(math.log(gb * 8.0)) - log_good
            lbw = log_bw[d]
            for n in range(N):
                u = (log_span - (lb - lbw[n])) / log_span
                lu[n] = min(max(u, zero), np.float32(1.0)) * hundred
        # 3. composite, penalty, clip, feasibility
        a = alpha[j]
        ca = compute_t[kind[j]]
        pen = accel_penalty[j]
        n0 = need[j, 0]
        n1 = need[j, 1]
        n2 = need[j, 2]
        u0 = usable_t[0]
        u1 = usable_t[1]
        u2 = usable_t[2]
        mask = class_mask[j]
        one = np.float32(1.0)
        for n in range(N):
            ok = available[n] and u0[n] >= n0 and u1[n] >= n1 and u2[n] >= n2
            if mask != 0:
                ok = ok and ((mask >> node_class[n]) & 1) == 1
            u = lu[n] if loads else zero
            if want_co:  # the same steps at alpha 1
                co_out[j, n] = _mixed(one, ca[n], row[n], loads, w, u, has_accel[n], pen) if ok else neg_inf
            row[n] = _mixed(a, ca[n], row[n], loads, w, u, has_accel[n], pen) if ok else neg_inf


@nb.njit(cache=True, inline="always")
def _mixed(a, compute, network, loads, w, load_u, accel, pen):  # pragma: no cover - compiled
    """One node's composite before feasibility: alpha-mixed, the load factor blended in, the
    accelerator penalty taken, clipped to 0..100 (float32 throughout)."""
    one = np.float32(1.0)
    v = a * compute + (one - a) * network
    if loads:
        v = (one - w) * v + w * load_u
    if accel:
        v -= pen
    return min(max(v, np.float32(0.0)), np.float32(100.0))


# numba's on-disk cache keys a function's builds by its name, line and argument types, not by
# ``parallel``: one function compiled both ways shares one cache entry, and the serial kernel loaded
# the threaded build (it started OpenMP's threads, after which a forked replay worker aborts). The
# serial kernel is the same code under a name of its own.
_score_rows_parallel = nb.njit(parallel=True, cache=True)(_score_rows_impl)
_serial_impl = types.FunctionType(_score_rows_impl.__code__, globals(), "_score_rows_serial")
_serial_impl.__qualname__ = "_score_rows_serial"  # what the cache's files are named by
_score_rows_serial = nb.njit(cache=True)(_serial_impl)


def filter_reasons(x: ScoringInputs, j: int) -> np.ndarray:
    """int8[N]: why each node cannot take job j (FEASIBLE where it can); first failing filter wins."""
    r = np.zeros(x.n_nodes, dtype=np.int8)

    def mark(mask, code):
        r[(r == FEASIBLE) & mask] = code

    mark(~x.available, UNAVAILABLE)
    if x.class_mask[j] != 0:
        mark(((int(x.class_mask[j]) >> x.node_class.astype(np.int64)) & 1) == 0, CLASS_NOT_ALLOWED)
    for col, code in ((0, NO_CARDS), (1, NO_ACCEL_MEM), (2, NO_HOST_MEM)):
        mark(x.usable[:, col] < x.need[j, col], code)
    return r


def network_scores_reference(x: ScoringInputs, j: int) -> np.ndarray:
    eps = x.ep_idx[x.ep_ptr[j]:x.ep_ptr[j + 1]]
    if eps.size == 0:
        net = np.where(np.isnan(x.node_quality), x.unknown_quality, x.node_quality).astype(np.float64)
    else:
        q = x.quality[eps].astype(np.float64)
        net = np.where(np.isnan(q), x.unknown_quality, q).mean(axis=0)
    return net


def load_seconds(data_gb, gbps):
    """Seconds to load ``data_gb`` GB at ``gbps`` Gbit/s (inf at 0): the load time the scores, the
    one-node alpha and the kernel's load factor all mean."""
    with np.errstate(divide="ignore"):
        return data_gb * 8.0 / gbps


def held_reasons(reasons: np.ndarray, quota_ok: np.ndarray, held: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """int8[N]: :func:`filter_reasons`' ``reasons`` with the feasible nodes its team's quota rules out
    (TEAM_QUOTA), then those ``held`` for the head of the queue (RESERVED), and every available node
    ``closed`` to new work (CORDONED: no room there because no new work goes there). The plain form
    of :func:`task_reasons`, which decisions use (the tests hold the two together)."""
    reasons = np.where((reasons == FEASIBLE) & ~quota_ok, TEAM_QUOTA, reasons)
    reasons = np.where((reasons == FEASIBLE) & held, RESERVED, reasons).astype(np.int8)
    if closed.any():
        reasons = np.where(closed & (reasons != UNAVAILABLE), CORDONED, reasons).astype(np.int8)
    return reasons


def task_reasons(x: ScoringInputs, j: int, usable: np.ndarray, quota_ok: np.ndarray, held: np.ndarray,
                 closed: np.ndarray) -> np.ndarray:
    """int8[N]: ``held_reasons(filter_reasons(x with usable, j), quota_ok, held, closed)`` in one
    compiled pass (a decision asks it of every node, once per task)."""
    return _task_reasons(np.asarray(x.available, np.bool_), np.int64(x.class_mask[j]), x.node_class.astype(np.int64),
                         usable, x.need[j], np.asarray(quota_ok, np.bool_), np.asarray(held, np.bool_),
                         np.asarray(closed, np.bool_))


@nb.njit(cache=True)
def _task_reasons(available, mask, node_class, usable, need, quota_ok, held, closed):  # pragma: no cover - compiled
    out = np.zeros(available.shape[0], np.int8)
    for i in range(available.shape[0]):
        r = FEASIBLE
        if not available[i]:
            r = UNAVAILABLE
        elif mask != 0 and ((mask >> node_class[i]) & 1) == 0:
            r = CLASS_NOT_ALLOWED
        elif usable[i, 0] < need[0]:
            r = NO_CARDS
        elif usable[i, 1] < need[1]:
            r = NO_ACCEL_MEM
        elif usable[i, 2] < need[2]:
            r = NO_HOST_MEM
        elif not quota_ok[i]:
            r = TEAM_QUOTA
        elif held[i]:
            r = RESERVED
        if closed[i] and r != UNAVAILABLE:
            r = CORDONED
        out[i] = r
    return out


def listed_reasons(reasons: np.ndarray, listed: int) -> tuple[np.ndarray, np.ndarray]:
    """(int64[len(REASONS)] how many nodes have each reason, int64[m] the rows of the first ``listed``
    nodes of each reason but FEASIBLE, in node order): what a decision names of the nodes it rejects."""
    return _listed_reasons(np.asarray(reasons, np.int8), len(REASONS), listed)


@nb.njit(cache=True)
def _listed_reasons(reasons, codes, listed):  # pragma: no cover - compiled (tested against a plain form)
    counts = np.zeros(codes, np.int64)
    rows = np.empty(reasons.shape[0], np.int64)
    m = 0
    for i in range(reasons.shape[0]):
        r = reasons[i]
        counts[r] += 1
        if r != FEASIBLE and counts[r] <= listed:
            rows[m] = i
            m += 1
    return counts, rows[:m]


def load_scores(x: ScoringInputs, j: int, at: np.ndarray | None = None) -> np.ndarray | None:
    """[N] 0..100 of job j's data load time on each node (the kernel's load factor), or None when it
    loads nothing; ``at`` (node rows): on those nodes only, the same values (a decision lists a few)."""
    if not (x.data_ep[j] >= 0 and x.data_gb[j] > 0):
        return None
    bw = x.bandwidth_gbps[x.data_ep[j]]
    bw = (bw if at is None else bw[np.asarray(at, np.int64)]).astype(np.float64)
    load_s = load_seconds(x.data_gb[j], bw)
    with np.errstate(divide="ignore"):
        u = (np.log(x.load_bad_s) - np.log(load_s)) / (np.log(x.load_bad_s) - np.log(x.load_good_s))
    return np.where(bw > 0, np.clip(u, 0, 1) * 100.0, 0.0)


def best_load_s(x: ScoringInputs) -> np.ndarray:
    """float64[J]: each job's load time (``data_gb x 8 / bandwidth``, s) over the best path from its
    data endpoint to an available node; 0 for a job that loads nothing, inf when no available node
    has bandwidth to it."""
    out = np.zeros(x.n_jobs, np.float64)
    loads = np.flatnonzero((x.data_ep >= 0) & (x.data_gb > 0))
    if loads.size == 0:
        return out
    # the widest path of each endpoint the jobs load from (a burst's hundreds of jobs name a few stores)
    eps, at = np.unique(x.data_ep[loads], return_inverse=True)
    bw = np.where(np.asarray(x.available, bool)[None, :], x.bandwidth_gbps[eps].astype(np.float64), 0.0)
    best = np.nan_to_num(bw, nan=0.0).max(axis=1, initial=0.0)[at.ravel()]
    out[loads] = np.where(best > 0, load_seconds(x.data_gb[loads], best), np.inf)
    return out


def score_reference(x: ScoringInputs) -> np.ndarray:
    """Plain numpy version of :func:`score_all`, one job at a time (the network part of
    :func:`score_parts` is :func:`network_scores_reference`)."""
    out = np.empty((x.n_jobs, x.n_nodes), dtype=np.float64)
    for j in range(x.n_jobs):
        net = network_scores_reference(x, j)
        v = x.alpha[j] * x.compute[:, x.kind[j]].astype(np.float64) + (1 - x.alpha[j]) * net
        load = load_scores(x, j)
        if load is not None:
            v = (1 - x.load_weight) * v + x.load_weight * load
        v = v - np.where(x.has_accel, x.accel_penalty[j], 0.0)
        v = np.clip(v, 0, 100)
        out[j] = np.where(filter_reasons(x, j) == FEASIBLE, v, -np.inf)
    return out
