"""Node failures from what the scheduler already sees: compute reports and path windows.

A node has failed when its reports stopped (older than the timeout), it reports itself down, or every
path touching it that is *evidence* lost (nearly) all its probes. Where the failure lies:
- ``compute``: the node is silent or down while its paths still carry probes (the network reaches it);
- ``network``: the node reports itself up and in time, but every path of evidence touching it is lost;
- ``both``: silent or down, and every path touching it is lost too;
- ``unknown``: silent or down, and no path touching it is known (nothing to tell them apart).

A network failure needs evidence (:class:`FailureRule`), so that probes coming up one by one never
stop running work: a path counts only when its latest window held at least ``min_probes`` probes,
its peer has answered before (a probe to a peer whose own agent is not up yet is not a lost path),
and its first window is older than ``grace_s``; a node joined less than ``grace_s`` ago is not failed
on its paths; the loss must be seen by at least ``min_observers`` distinct probing sources (one
node's own probe agent seeing everything lost says more about that agent than about the node); and
when more than ``max_network_fraction`` of the nodes would fail on their paths at once, none does:
those are *withheld* (more likely the observers than the nodes — Kubernetes' node lifecycle
controller stops evicting when a zone is mostly unhealthy, for the same reason), and the caller
opens an incident on them without moving work. A node whose own reports stop is failed as before.
A path is *dark* when it lost (nearly) all its probes, as evidence, between two nodes that are both up
and each still reach some other node: the outage is the path's, not a node's (:func:`dark_paths`).
Arrays in, arrays out; the caller keeps incidents over time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COMPUTE, NETWORK, BOTH, UNKNOWN = "compute", "network", "both", "unknown"
OBSERVERS = "observers"  # an incident on withheld nodes: the probes that see them are suspect, no work moves
LOST_LOSS = 0.95  # a path whose loss reaches this carries (almost) nothing


@dataclass(frozen=True)
class FailureRule:
    """What a network failure needs before it moves work (see the module's rules)."""

    min_probes: int = 3  # probes in a path's latest window before its loss counts
    grace_s: float = 30.0  # a node, and a path's first window, younger than this is not evidence
    min_observers: int = 2  # distinct probing sources that must see a node's paths lost
    max_network_fraction: float = 0.5  # more of the nodes failing on their paths at once: withheld

    def __post_init__(self) -> None:
        if self.min_probes < 1 or self.min_observers < 1:
            raise ValueError("min_probes and min_observers must be at least 1")
        if self.grace_s < 0 or not 0 < self.max_network_fraction <= 1:
            raise ValueError("grace_s must be >= 0 and max_network_fraction in (0, 1]")


def path_evidence(count: np.ndarray, answered: np.ndarray, first_age_s: np.ndarray, rule: FailureRule) -> np.ndarray:
    """bool[P]: which paths may count towards a network failure — ``count``: probes in the latest
    window, ``answered``: whether the peer has ever answered a probe, ``first_age_s``: how long ago
    the path's first window ended (NaN: never)."""
    with np.errstate(invalid="ignore"):
        return (np.asarray(count) >= rule.min_probes) & np.asarray(answered, bool) & (
            np.asarray(first_age_s) >= rule.grace_s)


def paths_lost(path_nodes: np.ndarray, path_loss: np.ndarray, n_nodes: int, observer: np.ndarray | None = None,
               evidence: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(known paths per node, of them lost, distinct observers of the lost ones) — ``path_nodes[P, 2]``:
    the two node rows a path touches (-1 where an end is not a node), ``path_loss[P]``: its loss (NaN
    unknown: not counted), ``observer[P]``: an id of the source that probed it (default: its first
    end's node row), ``evidence[P]`` (:func:`path_evidence`; default all): a lost path that is no
    evidence is not counted at all, while a path that carries probes always counts as known (the
    network reaches the node)."""
    known = np.zeros(n_nodes, np.int64)
    lost = np.zeros(n_nodes, np.int64)
    ok = ~np.isnan(path_loss)
    is_lost = ok & (path_loss >= LOST_LOSS)
    if evidence is not None:
        ok &= ~is_lost | evidence
        is_lost &= ok
    obs = path_nodes[:, 0] if observer is None else np.asarray(observer, np.int64)
    pairs = []
    for end in (0, 1):
        rows = path_nodes[:, end]
        sel = ok & (rows >= 0)
        known += np.bincount(rows[sel], minlength=n_nodes)
        lost_here = sel & is_lost
        lost += np.bincount(rows[lost_here], minlength=n_nodes)
        pairs.append(np.stack([rows[lost_here], obs[lost_here]], axis=1))
    pairs = np.unique(np.concatenate(pairs), axis=0)
    observers = np.bincount(pairs[:, 0], minlength=n_nodes) if len(pairs) else np.zeros(n_nodes, np.int64)
    return known, lost, observers


def node_failures(report_age_s: np.ndarray, reported_down: np.ndarray, timeout_s: float, known_paths: np.ndarray,
                  lost_paths: np.ndarray, observers: np.ndarray | None = None, joined_age_s: np.ndarray | None = None,
                  rule: FailureRule | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(failed bool[N], cause object[N]: "" where not failed, withheld bool[N]: failing on its paths
    only, but among too many at once to believe) — see the module's rules. Without ``observers`` and
    ``joined_age_s`` those checks are not made (the caller has already judged its evidence)."""
    rule = rule or FailureRule()
    silent = np.asarray(report_age_s, np.float64) > timeout_s
    compute_bad = silent | np.asarray(reported_down, bool)
    known = np.asarray(known_paths)
    network_bad = (known > 0) & (np.asarray(lost_paths) >= known)
    if observers is not None:
        network_bad &= np.asarray(observers) >= rule.min_observers
    if joined_age_s is not None:
        network_bad &= np.asarray(joined_age_s, np.float64) >= rule.grace_s
    withheld = np.zeros(network_bad.shape, bool)
    only_network = network_bad & ~compute_bad
    if only_network.sum() > max(1, int(rule.max_network_fraction * max(int((known > 0).sum()), 1))):
        withheld, network_bad = only_network, network_bad & compute_bad
    failed = compute_bad | network_bad
    if not failed.any():  # the usual case, asked at every window: no causes to spell out
        return failed, np.full(failed.shape, "", object), withheld
    cause = np.where(~failed, "", np.where(compute_bad & network_bad, BOTH, np.where(
        network_bad, NETWORK, np.where(known > 0, COMPUTE, UNKNOWN))))
    return failed, cause.astype(object), withheld


def dark_paths(path_nodes: np.ndarray, path_loss: np.ndarray, down: np.ndarray, known_paths: np.ndarray,
               lost_paths: np.ndarray, evidence: np.ndarray | None = None, observer: np.ndarray | None = None,
               min_observers: int = 2) -> np.ndarray:
    """bool[P]: the paths of node pairs that are dark — every known path between the two (either
    direction) lost (nearly) every probe (loss at least ``LOST_LOSS``; evidence, with ``evidence``),
    seen by at least ``min_observers`` distinct probing sources (``observer``, default each path's first
    end: both directions), between two distinct nodes, neither ``down``, each with a known path not
    lost (``known_paths`` > ``lost_paths``, :func:`paths_lost`): a node all of whose paths are lost is
    the node's failure (or its prober's), and one prober alone may be wrong about a path."""
    path_nodes = np.asarray(path_nodes, np.int64).reshape(-1, 2)
    a, b = path_nodes[:, 0], path_nodes[:, 1]
    loss = np.asarray(path_loss, np.float64)
    pair = (a >= 0) & (b >= 0) & (a != b) & ~np.isnan(loss)
    with np.errstate(invalid="ignore"):
        lost = pair & (loss >= LOST_LOSS)
    if evidence is not None:
        lost &= np.asarray(evidence, bool)
    if not lost.any():
        return lost
    fine = ~np.asarray(down, bool) & (np.asarray(known_paths) > np.asarray(lost_paths))
    n = max(int(path_nodes.max()) + 1, 1)
    key = np.minimum(a, b) * n + np.maximum(a, b)
    obs = a if observer is None else np.asarray(observer, np.int64)
    keys, inverse = np.unique(np.where(pair, key, -1), return_inverse=True)
    known_per = np.bincount(inverse, weights=pair, minlength=keys.size)
    lost_per = np.bincount(inverse, weights=lost, minlength=keys.size)
    seen = np.unique(np.stack([inverse[lost], obs[lost]], axis=1), axis=0)
    observers_per = np.bincount(seen[:, 0], minlength=keys.size)
    whole = (lost_per == known_per) & (known_per > 0) & (observers_per >= min_observers)
    ai, bi = np.where(pair, a, 0), np.where(pair, b, 0)
    return pair & whole[inverse] & fine[ai] & fine[bi]
