"""Dynamic rescheduling: move a running task only when the move pays for itself, and never flap.

Per task and evaluation (one per window of fresh state):
- *better*: the best other node beats the current one by at least ``min_gain_points`` (a path
  the task depends on degrading lowers its current composite; so do a better node joining, or the
  network improving elsewhere);
- *degraded* (names the trigger): a path the task depends on shifted — the degradation detector
  (core/detect.py: its last two windows at least ``shift_factor`` x the path's floor, the low quantile
  of the windows before, beyond their noise; sensitive 1.15x, default 1.3x, stable 1.5x) — or has p95 RTT >= a factor x its
  baseline (the p95 when the task was placed: a slow drift the detector's baseline follows), or a
  loss above a limit and that far above the path's loss at
  placement, measured on at least ``min_loss_probes`` probes (with the detector: a loss above the
  limit whose binomial tail under the path's loss at placement, at least ``loss_floor``, is below
  ``loss_alpha`` — the probes decide how sure it is); factor and limit scale with
  sensitivity (sensitive 1.5x / 0.5 %, default 2x / 1 %, stable 3x / 2 %); *forecast* when only the
  forecast p95 is degraded (preventive rescheduling, where the caller scores paths at the worse of
  measured and forecast p95);
- a streak counts consecutive evaluations with a better node that saw a fresh window of the task's
  own paths (rescorings in between do not count); the task acts only once the streak reaches its
  patience: sensitive tasks (small alpha) after ``patience_sensitive`` windows, stable ones (alpha >=
  ``stable_alpha``, e.g. inference services) after ``patience_stable``, others after
  ``patience_default`` (hysteresis);
- *node_failed*: the task's node is down or gone; it moves to the best node that can take it,
  whatever patience, cool-down or expected gain say; *path_failed* likewise, when a path between two
  of a gang's nodes is dark (core/failures.py: every probe lost both ways, its nodes fine);
- cost of a move (s) = checkpoint save + state transfer (checkpoint GB x 8 / the usable Gbit/s
  between source and target, the target's NIC headroom) + restore + the data loaded again at the
  target + queueing there; save and restore as the task's own checkpoint events measured them; expected gain (s) = remaining time x (1 - current / target composite)
  (throughput taken proportional to the composite score); the task moves when gain > cost x (1 +
  ``margin``). Remaining time is the expected duration less the time it has run (all placements),
  but never less than ``min_remaining_share`` of the expected duration: an estimate is an estimate,
  and a task that overran it — often because it runs slowly where it is — must stay movable;
- a moved task rests for ``cooldown_s``.
Deterministic: the same arrays in give the same moves out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.detect import loss_tail
from core.vocabulary import (
    DEGRADATION,
    DRAIN,
    FORECAST,
    IMPROVEMENT,
    NODE_FAILED,
    NODE_JOINED,
    PATH_FAILED,
)


@dataclass(frozen=True)
class ReschedulePolicy:
    degrade_factor: float = 2.0
    degrade_factor_sensitive: float = 1.5
    degrade_factor_stable: float = 3.0
    loss_limit: float = 0.01
    loss_limit_sensitive: float = 0.005
    loss_limit_stable: float = 0.02
    min_loss_probes: int = 200
    min_gain_points: float = 10.0
    patience_sensitive: int = 1
    patience_default: int = 2
    patience_stable: int = 4
    sensitive_alpha: float = 0.3
    stable_alpha: float = 0.7
    checkpoint_save_s: float = 30.0
    restore_s: float = 30.0
    margin: float = 0.2
    cooldown_s: float = 600.0
    detector: bool = True  # False: the seeds' rules only (latency x factor, loss over the limit, 200 probes)
    loss_floor: float = 0.003  # a path's own loss is taken as at least this (background loss)
    loss_alpha: float = 1e-3  # the binomial tail of the loss leg
    shift_factor_sensitive: float = 1.15
    shift_factor: float = 1.3
    shift_factor_stable: float = 1.5
    min_remaining_share: float = 0.1

    def by_sensitivity(self, alpha: np.ndarray, sensitive, default, stable) -> np.ndarray:
        """Per task: ``sensitive`` below ``sensitive_alpha``, ``stable`` from ``stable_alpha``, else ``default``."""
        alpha = np.asarray(alpha, dtype=np.float64)
        return np.where(alpha < self.sensitive_alpha, sensitive, np.where(alpha >= self.stable_alpha, stable, default))

    def patience(self, alpha: np.ndarray) -> np.ndarray:
        return self.by_sensitivity(alpha, self.patience_sensitive, self.patience_default, self.patience_stable)


DEFAULT_POLICY = ReschedulePolicy()


def degraded(p95_now: np.ndarray, p95_baseline: np.ndarray, loss_now: np.ndarray,
             policy: ReschedulePolicy = DEFAULT_POLICY, alpha: np.ndarray | None = None,
             probes: np.ndarray | None = None, loss_baseline: np.ndarray | None = None,
             shift: np.ndarray | None = None) -> np.ndarray:
    """True where a task's worst path is degraded (NaN inputs count as not degraded). Without
    ``alpha`` the default thresholds apply; without ``probes`` the loss leg needs no minimum count;
    ``shift``: the largest detector shift ratio among its paths (core.detect.ratio_now)."""
    p95_now = np.asarray(p95_now, dtype=np.float64)
    base = np.asarray(p95_baseline, dtype=np.float64)
    a = np.full(p95_now.shape, 0.5 * (policy.sensitive_alpha + policy.stable_alpha)) if alpha is None else alpha
    factor = policy.by_sensitivity(a, policy.degrade_factor_sensitive, policy.degrade_factor,
                                   policy.degrade_factor_stable)
    limit = policy.by_sensitivity(a, policy.loss_limit_sensitive, policy.loss_limit, policy.loss_limit_stable)
    loss = np.asarray(loss_now, dtype=np.float64)
    loss_base = np.zeros(loss.shape) if loss_baseline is None else np.nan_to_num(np.asarray(loss_baseline, float))
    enough = True if probes is None else np.nan_to_num(np.asarray(probes, float)) >= policy.min_loss_probes
    with np.errstate(invalid="ignore"):
        slow = (base > 0) & (p95_now >= factor * base)
        if policy.detector and probes is not None:  # binomial: the probes decide how sure a loss is
            p0 = np.maximum(loss_base, policy.loss_floor)
            lossy = (loss > limit) & (loss_tail(loss, probes, p0) < policy.loss_alpha)
        else:
            lossy = enough & (loss > limit) & (loss - loss_base > limit)
        if shift is not None and policy.detector:
            jump = policy.by_sensitivity(a, policy.shift_factor_sensitive, policy.shift_factor,
                                         policy.shift_factor_stable)
            slow |= np.asarray(shift, dtype=np.float64) >= jump
    return slow | lossy


def migration_cost_s(checkpoint_gb: np.ndarray, path_gbps: np.ndarray, queue_s: np.ndarray,
                     policy: ReschedulePolicy = DEFAULT_POLICY, save_s: np.ndarray | None = None,
                     restore_s: np.ndarray | None = None, reload_gb: np.ndarray | None = None,
                     reload_gbps: np.ndarray | None = None) -> np.ndarray:
    """Seconds a move costs: saving the checkpoint + moving it (GB x 8 / the path's usable Gbit/s
    between source and target) + restoring it + loading the task's data again at the target
    (``reload_gb`` x 8 / ``reload_gbps``, its data path there) + queueing at the target. ``save_s``
    and ``restore_s``: measured from the task's own checkpoint events (NaN: not measured yet, the
    policy's ``checkpoint_save_s`` / ``restore_s``). A path of no bandwidth costs infinity.
    Worked: 10 GB over 5 Gbit/s = 16 s, saved in 12 s, restored in 8 s, 50 GB of data over
    20 Gbit/s = 20 s, no queue: 56 s."""
    gb = np.asarray(checkpoint_gb, dtype=np.float64)
    transfer = _transfer_s(gb, path_gbps)
    save = _measured(save_s, policy.checkpoint_save_s, gb.shape)
    restore = _measured(restore_s, policy.restore_s, gb.shape)
    reload = 0.0 if reload_gb is None else _transfer_s(np.asarray(reload_gb, np.float64), reload_gbps)
    return save + transfer + restore + reload + np.asarray(queue_s, dtype=np.float64)


def _transfer_s(gb: np.ndarray, gbps) -> np.ndarray:
    bw = np.asarray(gbps, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(gb > 0, gb * 8.0 / bw, 0.0)
    return np.where(np.isfinite(t), t, np.inf)


def _measured(values, default: float, shape) -> np.ndarray:
    if values is None:
        return np.full(shape, default)
    v = np.asarray(values, np.float64)
    return np.where(np.isnan(v), default, v)


def remaining_s(expected_s: np.ndarray, ran_s: np.ndarray, policy: ReschedulePolicy = DEFAULT_POLICY) -> np.ndarray:
    """What is left of each task: its expected duration less what it has run, at least
    ``min_remaining_share`` of the expected duration (an overrunning task is not done)."""
    expected = np.asarray(expected_s, dtype=np.float64)
    return np.maximum(expected - np.asarray(ran_s, dtype=np.float64), policy.min_remaining_share * expected)


def expected_gain_s(current: np.ndarray, target: np.ndarray, remaining_s: np.ndarray) -> np.ndarray:
    cur = np.asarray(current, dtype=np.float64)
    tgt = np.asarray(target, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.asarray(remaining_s, dtype=np.float64) * (1.0 - cur / tgt)
    return np.where((tgt > cur) & (tgt > 0), g, 0.0)


def better(current: np.ndarray, best: np.ndarray, policy: ReschedulePolicy = DEFAULT_POLICY) -> np.ndarray:
    """bool[T]: the best other placement beats the current one by at least ``min_gain_points``."""
    current, best = np.asarray(current, np.float64), np.asarray(best, np.float64)
    return np.isfinite(best) & (best - current >= policy.min_gain_points)


@dataclass
class Evaluation:
    move: np.ndarray  # bool[T]
    trigger: np.ndarray  # object[T]: DEGRADATION / IMPROVEMENT / NODE_JOINED / ""
    streak: np.ndarray  # int[T], the counters to keep for the next evaluation
    gain_s: np.ndarray
    cost_s: np.ndarray


def evaluate(
    current: np.ndarray,  # composite of each task on its node now
    best: np.ndarray,  # composite of the best other node (-inf: none)
    is_degraded: np.ndarray,
    target_joined: np.ndarray,  # the best other node joined after the task was placed
    alpha: np.ndarray,
    streak: np.ndarray,  # counters from the previous evaluation
    remaining_s: np.ndarray,
    cost_s: np.ndarray,
    resting: np.ndarray,  # in cool-down
    policy: ReschedulePolicy = DEFAULT_POLICY,
    forecast: np.ndarray | None = None,  # degraded only in the forecast (preventive rescheduling)
    fresh: np.ndarray | None = None,  # a new window of the task's paths since the last evaluation
    node_failed: np.ndarray | None = None,  # the task's node is down or gone
    path_failed: np.ndarray | None = None,  # a path between two of its nodes is dark
    drained: np.ndarray | None = None,  # its node drains and its time to move has come (a checkpoint, the deadline)
    saved: tuple[np.ndarray, np.ndarray] | None = None,  # (gain s, required s) in seconds (core.ect.move_gain)
) -> Evaluation:
    """Which tasks move, and why. In points (the default): better by ``min_gain_points``, the gain
    ``remaining x (1 - current / best)`` against the cost and the policy's margin. With ``saved``
    (tasks placed in seconds): better when the seconds saved exceed the seconds required, and the
    move is worth exactly that; ``current`` and ``best`` then only say whether there is an alternative
    (``best`` finite)."""
    current = np.asarray(current, dtype=np.float64)
    best = np.asarray(best, dtype=np.float64)
    cost = np.asarray(cost_s, dtype=np.float64)
    if saved is None:
        better_now = better(current, best, policy)
        gain = expected_gain_s(current, best, remaining_s)
        pays = gain > cost * (1.0 + policy.margin)
    else:
        gain, required = (np.asarray(v, np.float64) for v in saved)
        better_now = pays = np.isfinite(best) & (gain > required)
    step = 1 if fresh is None else np.asarray(fresh, bool).astype(np.int64)
    new_streak = np.where(better_now, np.asarray(streak) + step, 0)
    node_down = np.zeros(current.shape, bool) if node_failed is None else np.asarray(node_failed, bool)
    path_down = np.zeros(current.shape, bool) if path_failed is None else np.asarray(path_failed, bool)
    failed = np.isfinite(best) & (node_down | path_down)
    drain = np.isfinite(best) & ~failed & (np.zeros(current.shape, bool) if drained is None
                                           else np.asarray(drained, bool))
    move = failed | drain | (better_now & (new_streak >= policy.patience(alpha)) & ~np.asarray(resting, bool)
                     & pays)
    fc = np.zeros(current.shape, bool) if forecast is None else np.asarray(forecast, bool)
    trigger = np.where(~move, "", np.where(failed, np.where(node_down, NODE_FAILED, PATH_FAILED), np.where(drain, DRAIN, np.where(
        np.asarray(is_degraded, bool), DEGRADATION, np.where(fc, FORECAST, np.where(
            np.asarray(target_joined, bool), NODE_JOINED, IMPROVEMENT))))))
    return Evaluation(move, trigger.astype(object), np.where(move, 0, new_streak), gain, cost)


def worst_known(values) -> float:
    """The largest of the known values (NaN when none is known)."""
    v = values.ravel().tolist() if isinstance(values, np.ndarray) else values  # a few values: plain Python
    known = [float(x) for x in v if x == x]
    return max(known) if known else math.nan


def endpoint_worst(values: np.ndarray, endpoint_rows: np.ndarray, node: int) -> float:
    """The worst known value (p95, loss) of a task's endpoint paths at ``node`` (``values[E, N]``)."""
    return worst_known(values[endpoint_rows, node])


def gang_path_state(p95: np.ndarray, loss: np.ndarray, endpoint_rows: np.ndarray,
                    members: list[int], loss_from_first: np.ndarray) -> tuple[float, float]:
    """(p95, loss) a gang is judged degraded by: the worst p95 of its endpoint paths at any member,
    and the worst loss of those paths and of each member's path to the first member
    (``loss_from_first[n]``: the first member's path to node n)."""
    p95_now = worst_known([endpoint_worst(p95, endpoint_rows, m) for m in members])
    loss_paths = [endpoint_worst(loss, endpoint_rows, m) for m in members]
    loss_paths += [float(loss_from_first[m]) for m in members[1:]]
    return p95_now, worst_known(loss_paths)


def endpoint_worst_loss(loss: np.ndarray, probes: np.ndarray, endpoint_rows: np.ndarray,
                        node: int) -> tuple[float, float]:
    """(loss, probes) of the lossiest known endpoint path of a task at ``node`` (NaN, 0 when none)."""
    v = loss[endpoint_rows, node]
    if v.size == 0 or np.isnan(v).all():
        return math.nan, 0.0
    k = int(np.nanargmax(v))
    return float(v[k]), float(np.nan_to_num(probes[endpoint_rows[k], node]))


def worst_per_task(values: np.ndarray, ep_ptr: np.ndarray, ep_idx: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """float64[T]: :func:`endpoint_worst` for every task at once — task t's endpoint rows are
    ``ep_idx[ep_ptr[t]:ep_ptr[t + 1]]``, its node ``cols[t]`` (NaN where none is known)."""
    worst, _ = _segment_max(values, ep_ptr, ep_idx, cols)
    return worst


def worst_loss_per_task(loss: np.ndarray, probes: np.ndarray, ep_ptr: np.ndarray, ep_idx: np.ndarray,
                        cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loss[T], probes[T]): :func:`endpoint_worst_loss` for every task at once (the probes of the
    lossiest path; the most probes among paths tied at that loss)."""
    worst, task_of = _segment_max(loss, ep_ptr, ep_idx, cols)
    T = len(cols)
    if task_of.size == 0:
        return worst, np.zeros(T)
    vals = loss[ep_idx, cols[task_of]]
    at_worst = vals == worst[task_of]
    p = np.where(at_worst, np.nan_to_num(probes[ep_idx, cols[task_of]]), -1.0)
    best = _max_by_task(p.astype(np.float64), ep_ptr, -1.0)
    return worst, np.where(best < 0, 0.0, best)


def _segment_max(values: np.ndarray, ep_ptr: np.ndarray, ep_idx: np.ndarray, cols: np.ndarray):
    T = len(cols)
    counts = np.diff(np.asarray(ep_ptr, np.int64))
    task_of = np.repeat(np.arange(T), counts)
    out = np.full(T, -np.inf)
    if task_of.size:
        vals = values[ep_idx, np.asarray(cols)[task_of]].astype(np.float64)
        out = _max_by_task(np.where(np.isnan(vals), -np.inf, vals), ep_ptr, -np.inf)
    return np.where(np.isneginf(out), np.nan, out), task_of


def _max_by_task(vals: np.ndarray, ep_ptr: np.ndarray, empty: float) -> np.ndarray:
    """float64[T]: the largest of each task's values (``vals`` laid out by ``ep_ptr``, task after
    task), ``empty`` for a task without any: one reduceat over the tasks that have some."""
    ptr = np.asarray(ep_ptr, np.int64)
    out = np.full(len(ptr) - 1, empty)
    some = ptr[1:] > ptr[:-1]
    if some.any():
        out[some] = np.maximum(np.maximum.reduceat(vals, ptr[:-1][some]), empty)
    return out


def news(newest, seen, version: int, seen_version) -> tuple[np.ndarray, np.ndarray]:
    """(fresh, seen after) of tasks whose newest path window ended at ``newest`` (NaN: none known)
    and who last saw windows up to ``seen`` and forecasts up to ``seen_version``: news is a window
    newer than seen (NaN counting as news: patience counts these, not rescorings) or a newer
    forecast ``version``; afterwards each has seen the newer of the two windows (NaN on either side:
    the other). Elementwise over arrays or scalars."""
    newest, seen = np.asarray(newest, np.float64), np.asarray(seen, np.float64)
    fresh = ~(newest <= seen) | (version > np.asarray(seen_version))
    return fresh, np.fmax(seen, newest)


def quality_drift(u_now: np.ndarray, u_ref: np.ndarray, weights: np.ndarray) -> float:
    """The most any path's quality (core.quality.combine of its dimension utilities, float[P, 5],
    with ``weights``) can have moved from ``u_ref`` to ``u_now``: per path the weighted mean of its
    utilities' changes over the dimensions it has (a weighted mean moves no more than that); inf when
    the paths or which of their dimensions are known differ, 0 without paths.
    Worked: weights (0.5, 0.5), a path (80, 40) -> (83, 40): 1.5; (80, NaN) -> (83, NaN): 3."""
    if u_now.shape != u_ref.shape:
        return math.inf
    known = ~np.isnan(u_now)
    if not np.array_equal(known, ~np.isnan(u_ref)):
        return math.inf
    if not u_now.size:
        return 0.0
    w = np.where(known, np.asarray(weights, np.float64), 0.0)
    total = w.sum(axis=-1)
    moved = (np.abs(np.where(known, u_now - u_ref, 0.0)) * w).sum(axis=-1)
    return float(np.max(np.where(total > 0, moved / np.where(total > 0, total, 1.0), 0.0)))


def log_drift(now: np.ndarray, ref: np.ndarray) -> float:
    """The largest |log now - log ref| over values positive and finite in both; inf when which values
    are differs (a path's RTT appearing or gone), 0 for none. Worked: (10, NaN) -> (12.5, NaN): log 1.25."""
    now, ref = np.asarray(now, np.float64), np.asarray(ref, np.float64)
    if now.shape != ref.shape:
        return math.inf
    with np.errstate(invalid="ignore"):
        pos = np.isfinite(now) & (now > 0)
        if not np.array_equal(pos, np.isfinite(ref) & (ref > 0)):
            return math.inf
    if not pos.any():
        return 0.0
    return float(np.max(np.abs(np.log(now[pos]) - np.log(ref[pos]))))


QUIET_SLACK = 1e-3  # points: what the kernel's float32 rounding may add to a score beyond its inputs' drift


def stays_quiet(gap: float, drift: float, policy: ReschedulePolicy = DEFAULT_POLICY) -> bool:
    """Whether tasks whose best other node was at most ``gap`` points better than their own at an
    evaluation that moved none (``better`` false for all) still cannot be better by the policy's
    minimum gain, when every score has moved by at most ``drift`` points since: both their own and
    the other node's score may have, so the gap grows by at most twice that (and the rounding slack).
    Worked: gap 6, drift 1.9, min gain 10: 6 + 2 x 1.901 = 9.802 < 10, still quiet."""
    return gap + 2.0 * (drift + QUIET_SLACK) < policy.min_gain_points
