"""Quiet groups: a profile's single-node running tasks that no rescoring could move, not scored again
while what their scores are made of has not moved enough to matter.

Almost every rescoring of a group finds no task whose best other node beats its own by the policy's
minimum gain (migration._quiet: in the replay's first thousand jobs, 43,236 of 43,425), while the
windows it reads move each score by hundredths of a point. After such an evaluation the group's
largest gap (best other node less its own, ``gap``) is kept with what the scores were computed from,
and the largest over every other node whose capacity fits the task (``gap_any``: what room coming back
could offer, from the scores before the room's mask). At a later window, while the same tasks run on
the same nodes, no node came back, the nodes' compute, energy and links are the same arrays and the
paths are the same (``gap_any`` stands for ``gap`` where some node has more room), every score can
have moved by no more than the paths' quality drift (core.reschedule.quality_drift: a task's network
score is a mean of path qualities, a node's mean quality too) or, for a task loading data, the load
factor's drift from the paths' RTT (core.reschedule.log_drift, through the TCP window bound); while
``gap`` plus twice that stays below the minimum gain (core.reschedule.stays_quiet), scoring the group
again would find it quiet, and what a quiet evaluation does is done directly: each task sees its
paths' newest windows and its streak resets. Whatever else may matter (forecasts, constraints, a
failed or draining node, a node whose room went below zero) sends the group to the full evaluation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from core.quality import DEFAULT_MODEL
from core.reschedule import log_drift, news, quality_drift, stays_quiet, worst_known, worst_per_task
from streams.adapters.inventory import NodeView
from streams.worker.scheduling.path_table import aged_to, ages_of, ends_table


@dataclass(eq=False)
class Read:
    """What scores were computed from, besides the tasks (see the module); one per node view, shared
    by the groups and gangs found quiet on it."""

    view: tuple  # _view: the node view's static arrays and the type defaults (identities)
    usable: np.ndarray
    available: np.ndarray
    cols: object  # the PathColumns, and their rows' and names' count
    paths: tuple
    u: np.ndarray  # the paths' dimension utilities (PathColumns.quality_inputs; read-only)
    p95: np.ndarray
    confidence: np.ndarray | None  # how much each path's quality counted (aging); None: no aging
    local_util: np.ndarray  # node-local NIC utilisation rows (the nodes' headroom)
    log_span: float  # the load factor's span (log bad - log good load seconds)


@dataclass
class Steady:
    """A quiet evaluation of a group or a gang: its tasks, its largest gap, what it read."""

    members: tuple  # (id(run), id(task), nodes, alpha) of each task, in the group's order
    runs: list  # the runs (kept: their ids stay theirs)
    gap: float  # best other placement less the current one, the largest of the group (-inf: none)
    read: Read
    eps: list[str]  # the endpoints and each task's rows among them
    ep_ptr: np.ndarray
    ep_idx: np.ndarray
    cur: np.ndarray  # node rows: each single task's, or a gang's members
    gap_any: float = np.inf  # the gap had every node room for a task (a worker): by capacity

    @functools.cached_property
    def where(self) -> dict:
        """Each member's place in ``members``."""
        return {m: i for i, m in enumerate(self.members)}


def _members(runs: list) -> tuple:
    return tuple((id(r), id(r.task), tuple(r.nodes), r.alpha) for r in runs)


def _view(sched, nodes: NodeView) -> tuple:
    """What scores read besides the paths and the room, by identity: the node view's static arrays
    (rebuilt when the inventory changes) and the type defaults a task's job side is read with."""
    return (nodes.ids, nodes.compute, nodes.energy, nodes.link_gbps, nodes.node_class, nodes.has_accel,
            *sched.types.values(), sched.compute_scope)


def _paths(sched, nodes: NodeView, shared: dict) -> tuple:
    """(columns, (rows, names), utilities, p95, confidence, node-local utilisation) as the network
    view stands, aged to the view's time as the path tables are (once per view: ``shared``)."""
    hit = shared.get("paths")
    if hit is not None:
        return hit
    cols = sched.net.columns()
    rows, x, u = cols.quality_inputs()
    aging = ages_of(cols, rows, aged_to(nodes.at, sched.freshness), sched.freshness)
    conf = None if aging is None else sched.freshness.confidence(aging[0])
    local = cols.cols["bw_util"][:cols.n][cols.dst[:cols.n] == cols.empty]
    shared["paths"] = cols, (cols.n, len(cols.names)), u, x["p95_rtt_ms"], conf, local
    return shared["paths"]


def _shared(sched, nodes: NodeView) -> dict:
    """What the checks and evaluations on one node view share (the paths as they stand, the Read
    kept, each drift): a rescoring's groups and gangs read the same view."""
    hit = sched._cache.get(("steady view",))
    if hit is None or hit[0] is not nodes:
        hit = sched._cache[("steady view",)] = (nodes, {})
    return hit[1]


def _read(sched, nodes: NodeView, x) -> Read:
    span = float(np.log(x.load_bad_s) - np.log(x.load_good_s))
    shared = _shared(sched, nodes)
    read = shared.get(("read", span))
    if read is None:
        read = shared[("read", span)] = Read(_view(sched, nodes), nodes.usable.copy(), nodes.available.copy(),
                                             *_paths(sched, nodes, shared), span)
    return read


def _drift(sched, nodes: NodeView, ref: Read, cur: np.ndarray, profile: str) -> float:
    """How far any score of the tasks on node rows ``cur`` can have moved since ``ref`` was read:
    inf when anything but the paths' values and the room moved (a node, the paths themselves);
    whether room came back is :func:`_room_back`'s."""
    if nodes.ids is not ref.view[0]:  # another node list: ``cur`` (rows of the old one) means nothing here
        return np.inf
    if not nodes.available[cur].all() or not (np.asarray(nodes.usable[cur], np.float32) >= 0).all():
        return np.inf
    if nodes.draining.any() and nodes.draining[cur].any():
        return np.inf  # a task may be due off its node: migration.drain_due decides, in full
    shared = _shared(sched, nodes)
    drift = shared.get((ref, profile))
    if drift is None:
        drift = shared[(ref, profile)] = _paths_drift(sched, nodes, ref, profile, shared)
    return drift


def _paths_drift(sched, nodes: NodeView, ref: Read, profile: str, shared: dict) -> float:
    """_drift's part that does not depend on the tasks' nodes."""
    view = _view(sched, nodes)
    if len(view) != len(ref.view) or any(a is not b for a, b in zip(view, ref.view, strict=True)):
        return np.inf
    if (nodes.available & ~ref.available).any():
        return np.inf
    cols, paths, u, p95, conf, local = _paths(sched, nodes, shared)
    if cols is not ref.cols or paths != ref.paths or not np.array_equal(local, ref.local_util, equal_nan=True):
        return np.inf
    if (conf is None) != (ref.confidence is None) or (conf is not None and not np.array_equal(conf, ref.confidence)):
        return np.inf
    return max(quality_drift(u, ref.u, DEFAULT_MODEL.weights(profile)), 100.0 * log_drift(p95, ref.p95) / ref.log_span)


def _room_back(sched, nodes: NodeView, ref: Read) -> bool:
    """Whether some node has more room now than when ``ref`` was read, or the node list is another
    (once per view and read)."""
    shared = _shared(sched, nodes)
    back = shared.get(("room back", ref))
    if back is None:
        back = shared[("room back", ref)] = nodes.ids is not ref.view[0] or not (nodes.usable <= ref.usable).all()
    return back


def _may_remember(sched, nodes: NodeView, runs: list, cur: np.ndarray) -> bool:
    """Groups and gangs with constraints, preventive mode, or a node whose room is below zero are
    always evaluated in full."""
    return not sched.forecast_p95 and all(r.task.constraints is None for r in runs) and \
        bool((np.asarray(nodes.usable, np.float32)[cur] >= 0).all())


def remember(sched, nodes: NodeView, group: list, profile: str, x, eps: list[str], cur: np.ndarray,
             gap: float, gap_any: float) -> None:
    """A full evaluation of ``group`` (single-node tasks of ``profile``) found it quiet with largest
    gap ``gap`` (``gap_any``: had every node its capacity free): keep what it read."""
    if not _may_remember(sched, nodes, group, cur):
        forget(sched, profile)
        return
    sched._cache[("steady", profile)] = Steady(_members(group), list(group), gap, _read(sched, nodes, x), list(eps),
                                               x.ep_ptr, x.ep_idx, cur, gap_any)


def forget(sched, profile: str) -> None:
    sched._cache.pop(("steady", profile), None)


def still_quiet(sched, nodes: NodeView, group: list, profile: str) -> bool:
    """Whether ``group`` is quiet by its last full evaluation (see the module; a group some of whose
    tasks have left since is as quiet as the whole was: each task's own gap is within it); if so, each
    task has seen its paths' newest windows and its streak is reset, as that evaluation would have done."""
    ref, rows = _kept(sched, sched._cache.get(("steady", profile)), group)
    if ref is None:
        return False
    gap = ref.gap_any if _room_back(sched, nodes, ref.read) else ref.gap  # room back: what it could offer
    if not stays_quiet(gap, _drift(sched, nodes, ref.read, ref.cur, profile), sched.policy):
        return False
    see(sched, group, _ends(sched, nodes).gather("end", ref.eps, len(nodes.ids)), ref.ep_ptr, ref.ep_idx, ref.cur,
        rows)
    for r in group:
        r.streak = 0
    return True


def _kept(sched, ref: Steady | None, runs: list) -> tuple[Steady | None, np.ndarray | None]:
    """(``ref``, None) if it was kept for these very runs (the same tasks on the same nodes) and
    preventive mode is off; (``ref``, each run's place among its runs) if these are some of them;
    (None, None) else."""
    if ref is None or sched.forecast_p95:
        return None, None
    members = _members(runs)
    if members == ref.members:
        return ref, None
    rows = [ref.where.get(m) for m in members]
    return (None, None) if None in rows else (ref, np.array(rows, np.int64))


def _gangs(sched) -> dict:
    return sched._cache.setdefault(("steady gangs",), {})


def remember_gang(sched, nodes: NodeView, r, x, eps: list[str], t: int, members: list[int], gap: float,
                  gap_any: float) -> None:
    """A gang's full evaluation found no placement that could be better by the minimum gain (its upper
    bound less its value: ``gap``; ``gap_any``: the same bound over every node whose capacity fits a
    worker, whatever room it has): keep what it read (``x``, ``eps``: its profile's inputs, ``t`` its
    row)."""
    cur, kept = np.asarray(members, np.int64), _gangs(sched)
    if not _may_remember(sched, nodes, [r], cur):
        kept.pop(r.task.id, None)
        return
    if len(kept) > 2 * len(sched.running) + 64:  # gangs that ended: forgotten now and then
        for task_id in [k for k in kept if k not in sched.running]:
            del kept[task_id]
    kept[r.task.id] = Steady(_members([r]), [r], gap, _read(sched, nodes, x),
                             [eps[i] for i in x.ep_idx[x.ep_ptr[t]:x.ep_ptr[t + 1]]], None, None, cur, gap_any)


def gang_still_quiet(sched, nodes: NodeView, r, saw) -> bool:
    """Whether a running gang is quiet by its last full evaluation; if so, it has seen its paths'
    newest windows (``saw(sched, r, newest)``: migration._saw) and its streak is reset."""
    ref = _kept(sched, _gangs(sched).get(r.task.id), [r])[0]
    if ref is None:
        return False
    # the bound and the value each move by no more than the drift (a value is a mean of scores and of
    # peer worths, each alpha x compute + (1 - alpha) x a mean quality); with room back somewhere, the
    # bound over every node a worker could ever fit bounds it
    gap = ref.gap_any if _room_back(sched, nodes, ref.read) else ref.gap
    if not stays_quiet(gap + 1e-6, _drift(sched, nodes, ref.read, ref.cur, r.profile), sched.policy):
        return False
    ends, n = _ends(sched, nodes), len(nodes.ids)
    at = ends.gather("end", ref.eps, n)[:, ref.cur]
    first = ends.gather("end", [nodes.ids[ref.cur[0]]], n)[0][ref.cur[1:]]
    saw(sched, r, worst_known(np.concatenate([at.ravel(), first])))
    r.streak = 0
    return True


def see(sched, group: list, end: np.ndarray, ep_ptr: np.ndarray, ep_idx: np.ndarray, cur: np.ndarray,
        rows: np.ndarray | None = None) -> np.ndarray:
    """bool[T]: each task of a group saw its paths' news (core.reschedule.news), by the newest window
    of its own paths at its node (``end``: the windows' ends, endpoints x nodes); it has now seen them.
    ``rows``: the group's places among the tasks ``ep_ptr`` and ``cur`` describe (None: the same)."""
    newest = worst_per_task(end, ep_ptr, ep_idx, cur)
    if rows is not None:
        newest = newest[rows]
    version = sched.forecast_version
    fresh, seen = news(newest, [r.seen_window_end for r in group], version,
                       [r.seen_forecast_version for r in group])
    for r, end_ in zip(group, seen.tolist(), strict=True):
        r.seen_window_end, r.seen_forecast_version = end_, version
    return fresh


def _ends(sched, nodes: NodeView):
    """The windows' ends as a path table reads them, once per version of the network view."""
    key = ("ends", getattr(sched.net, "version", None), tuple(nodes.ids))
    if key[1] is None:
        return ends_table(sched.net.columns(), nodes.ids, nodes.racks, nodes.rack_aliases)
    return sched._cached(key, lambda: ends_table(sched.net.columns(), nodes.ids, nodes.racks, nodes.rack_aliases))
