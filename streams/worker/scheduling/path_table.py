"""The network view as the scheduler reads it: every known path's quality for one network profile,
its p95 RTT and loss, indexed by endpoint, plus each node's mean quality and NIC headroom.

Built once per version of the network view (numpy over :class:`~streams.adapters.network.PathColumns`,
O(paths)); each decision then gathers only its own endpoints' rows (O(nodes) each), and a node's row
as an endpoint only when a gang asks for it. In preventive mode the quality uses the worse of
measured and forecast p95 RTT (``p95_eff``); ``p95`` stays as measured.

Rack-level probes: probing every node pair is O(N^2) paths; operators probe between top-of-rack
points instead (Pingmesh's inter-rack level). A path towards ``rack:<R>`` (``R`` the ``rack`` the
nodes report) stands for every node of rack R where no node-level path is known, and a path from
``rack:<R>`` stands for the nodes of R as sources: between two nodes, the node pair's own path wins,
else their racks' path (``rack:R`` to itself: inside the rack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from core.detect import ratio_now
from core.failures import FailureRule, path_evidence
from core.quality import (
    BOTH_WAYS,
    DEFAULT_MODEL,
    Freshness,
    aged_quality,
    combine,
    mean_by_group,
    path_quality,
    worse_direction,
)
from streams.adapters.network import PathColumns
from streams.worker.scheduling.path_shape import rack_node_q, shape_of

_EMPTY = np.zeros(0, np.int64)


@dataclass
class PathTable:
    q: np.ndarray  # float32[P] quality of each path for the profile (NaN: no data)
    p95: np.ndarray  # float64[P] measured p95 RTT
    p95_eff: np.ndarray  # float64[P] p95 the quality was computed from (forecast overlay)
    loss: np.ndarray  # float64[P]
    probes: np.ndarray  # float64[P] rtt probes in the latest window (the loss leg needs enough of them)
    end: np.ndarray  # float64[P] end of the latest rtt window (patience counts fresh windows)
    path_nodes: np.ndarray  # int64[P, 2] node rows of the path's source and destination (-1: not a node)
    by_ep: dict[str, tuple[np.ndarray, np.ndarray]]  # endpoint -> (node columns, path rows)
    node_q: np.ndarray  # float32[N] mean quality of a node's known paths
    headroom: np.ndarray  # float64[N] 1 - NIC utilisation (1 where unknown)
    node_rack: np.ndarray = field(default_factory=lambda: _EMPTY)  # int64[N] rack code (-1: none)
    to_racks: dict[str, np.ndarray] = field(default_factory=dict)  # endpoint -> int64[racks] path row (-1)
    rack_of: dict[str, str] = field(default_factory=dict)  # node -> its rack endpoint
    history: tuple | None = None  # (PathColumns, path rows): the window p95s the shift is read from
    rack_index: dict = field(default_factory=dict)  # source -> (bool[N], int64[N]) _Shape.rack_index
    _shift: np.ndarray | None = None
    _shift_known: np.ndarray | None = None  # bool[P] where _shift is computed
    _rack_rows: dict = field(default_factory=dict)  # (column, rack endpoint) -> its row over the nodes
    inputs: dict = field(default_factory=dict)  # endpoints -> (node ids, links, NetworkInputs) (Scheduler.network)
    gbps: np.ndarray | None = None  # float64[P] measured throughput, median of the latest window (NaN: none)

    def shift_at(self, rows: np.ndarray) -> np.ndarray:
        """float64[P] core.detect.ratio_now of every path (0: none), computed for ``rows`` where not
        yet (elsewhere unset): deciding does not need it, rescoring only its endpoints' paths, and at
        5,000 nodes the rack-level paths are 400,000."""
        if self._shift is None:
            self._shift, self._shift_known = np.zeros(self.q.size), np.zeros(self.q.size, bool)
        rows = np.asarray(rows, np.int64)
        todo = np.unique(rows[~self._shift_known[rows]])
        if todo.size and self.history is not None:
            cols, path_rows = self.history
            self._shift[todo] = ratio_now(cols.history(path_rows[todo]))
        self._shift_known[todo] = True
        return self._shift

    def any_at_least(self, name: str, value: float) -> bool:
        """Whether some path's ``name`` column reaches ``value`` (once per table and question: a gang's
        costing asks whether any path is dark before gathering its members' losses)."""
        key = ("any at least", name, value)
        hit = self._rack_rows.get(key)
        if hit is None:
            col = getattr(self, name)
            with np.errstate(invalid="ignore"):
                hit = self._rack_rows[key] = bool(col.size and (col >= value).any())
        return hit

    def _column(self, name: str, source: str | None, rows: np.ndarray) -> np.ndarray:
        """A per-path column, ``shift`` computed for the paths a gather reads (the source's rack-level
        paths and ``rows``)."""
        if name != "shift":
            return getattr(self, name)
        racks = self.to_racks.get(source, _EMPTY) if source is not None else _EMPTY
        return self.shift_at(np.concatenate([racks[racks >= 0], rows]))

    def gather(self, name: str, endpoints: list[str], n_nodes: int, dtype=np.float64) -> np.ndarray:
        """[E, N] of one per-path column (NaN where no path is known): node-level paths, and where
        none is known, the path from the endpoint (or its rack) to the node's rack."""
        out = np.empty((len(endpoints), n_nodes), dtype)
        for a, ep in enumerate(endpoints):
            source = ep if ep in self.to_racks else self.rack_of.get(ep)
            cols, rows = self.by_ep.get(ep, (_EMPTY, _EMPTY))
            racked = source in self.to_racks
            col = self._column(name, source if racked else None, rows)
            rack_row = self._rack_row(name, col, source) if racked else None
            out[a] = np.nan if rack_row is None else rack_row
            if cols.size:
                out[a, cols] = col[rows]  # node-level paths win
                if rack_row is not None:
                    gap = np.isnan(out[a])  # a node-level path without a value: its rack's path stands in
                    out[a, gap] = rack_row[gap]
        return out

    def among(self, name: str, members: np.ndarray, node_ids: list[str]) -> np.ndarray:
        """float64[..., U, U]: ``gather(name, [node_ids[m] for m in members], len(node_ids))[:, members]``
        (a gang's member pairs) without the full rows: each member's rack-level source row read at the
        members' racks only, a member with node-level paths of its own through :meth:`gather`.
        ``members`` int64[U], or int64[K, U] (sets of members: each set's pairs, [K, U, U])."""
        if name == "shift":
            raise ValueError("shift is computed per gathered path: gather it")
        members = np.asarray(members, np.int64)
        src, towards, own = self.sources(node_ids)
        col = getattr(self, name)
        s, r = src[members], self.node_rack[members]
        out = np.full((*members.shape, members.shape[-1]), np.nan)
        if towards.size and members.size:
            rows = towards[np.maximum(s, 0)[..., :, None], np.maximum(r, 0)[..., None, :]]
            ok = (s >= 0)[..., :, None] & (r >= 0)[..., None, :] & (rows >= 0)
            out = np.where(ok, col[np.maximum(rows, 0)], np.nan)
        for at in np.argwhere(own[members]).tolist():  # node-level paths win (rare)
            *k, i = at
            out[(*k, i)] = self.gather(name, [node_ids[int(members[(*k, i)])]], len(node_ids))[0][members[tuple(k)]]
        return out

    def _node_sources(self, node_ids: list[str]) -> tuple[list, np.ndarray]:
        """(the distinct sources, int64[N] which of them each node reads its paths from): the node
        itself when it is a rack-level source, else its rack (None: neither). The shape's, built once
        per node list (its length and first and last names)."""
        n = len(node_ids)
        key = ("node sources", n, node_ids[0] if n else None, node_ids[-1] if n else None)
        hit = self.rack_index.get(key)
        if hit is None:
            sources = [ep if ep in self.to_racks else self.rack_of.get(ep) for ep in node_ids]
            distinct = list(dict.fromkeys(sources))
            at = {x: k for k, x in enumerate(distinct)}
            hit = self.rack_index[key] = (distinct, np.array([at[x] for x in sources], np.int64))
        return hit

    def sources(self, node_ids: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(int64[N] each node's rack-level source in ``towards`` (-1: none), int64[S, racks] each such
        source's path row towards every rack (:meth:`gather`'s ``to_racks`` rows), bool[N] whether the
        node has node-level paths of its own): from :meth:`_node_sources`, once per node list."""
        key = ("member sources", len(node_ids))
        hit = self.rack_index.get(key)
        if hit is not None and hit[0] is node_ids:
            return hit[1]
        distinct, which = self._node_sources(node_ids)
        served = [x for x in distinct if x in self.to_racks]
        at = np.full(len(distinct), -1, np.int64)  # each distinct source's row of ``towards``
        at[[k for k, x in enumerate(distinct) if x in self.to_racks]] = np.arange(len(served))
        towards = np.stack([self.to_racks[x] for x in served]) if served else np.zeros((0, 0), np.int64)
        own = np.array([ep in self.by_ep for ep in node_ids], bool) if self.by_ep else np.zeros(len(node_ids), bool)
        out = (at[which], towards, own)
        self.rack_index[key] = (node_ids, out)
        return out

    def node_matrix(self, name: str, node_ids: list[str], dtype=np.float64) -> np.ndarray:
        """``gather(name, node_ids, len(node_ids), dtype)``: every node as an endpoint at once, each
        its rack's row (one per rack, shared) unless it has node-level paths of its own; built once
        per table, column and type (read it, never write it)."""
        if name == "shift":
            raise ValueError("shift is computed per gathered path: gather it")
        key = ("matrix", name, np.dtype(dtype).str)
        hit = self._rack_rows.get(key)
        if hit is not None and hit[0] is node_ids:
            return hit[1]
        n = len(node_ids)
        distinct, which = self._node_sources(node_ids)
        none = np.full(n, np.nan)
        rows = [self._rack_row(name, self._column(name, x, _EMPTY), x) if x in self.to_racks else none
                for x in distinct]
        out = np.stack(rows)[which].astype(dtype) if n else np.empty((0, 0), dtype)
        for i, ep in enumerate(node_ids):
            if ep in self.by_ep:  # node-level paths win (rare: probes usually run between racks)
                out[i] = self.gather(name, [ep], n, dtype)[0]
        self._rack_rows[key] = (node_ids, out)
        return out

    def _rack_row(self, name: str, col: np.ndarray, source: str) -> np.ndarray:
        """float64[N] of ``col`` from ``source`` (an endpoint or a rack) to every node's rack (NaN where
        none), once per table: every node of a rack without paths of its own shares it."""
        key = (name, source)
        row = self._rack_rows.get(key)
        if row is None:
            at = self.rack_index.get(source)
            if at is None:  # which path row serves each node's rack: the shape's, not the values'
                racks = self.to_racks[source]
                r = np.where(self.node_rack >= 0, racks[np.maximum(self.node_rack, 0)], -1)
                at = self.rack_index[source] = (r >= 0, np.maximum(r, 0))
            row = self._rack_rows[key] = np.where(at[0], col[at[1]], np.nan)
        return row


def build_path_table(cols: PathColumns, node_ids: list[str], profile: str,
                     forecast_p95: dict[tuple[str, str], float] | None = None,
                     node_racks: list[str] | None = None, rack_aliases: list[str] | None = None,
                     now: float | None = None, freshness: Freshness | None = None) -> PathTable:
    """``node_racks``: each node's rack endpoint (streams.adapters.network.rack_endpoint, scoped by
    site; '' none); ``rack_aliases``: the same unscoped (``rack:<rack>``), which probes may name a
    rack by where no other site has a rack of that name. With ``now`` and ``freshness``, paths age:
    a path's quality is drawn towards unknown as its latest rtt window grows old
    (core.quality.aged_quality), and a stale path is unknown (quality, p95, loss and probes NaN:
    neither scored nor judged degraded or lost by what it last said)."""
    rows, x, u = cols.quality_inputs()  # shared by every profile's table of this network version
    src, dst = cols.src[rows], cols.dst[rows]
    p95 = x["p95_rtt_ms"]
    p95_eff = p95
    if forecast_p95 and rows.size:
        # preventive mode: a path forecast to be slower is scored as if it already were
        fc = np.array([forecast_p95.get((cols.names[a], cols.names[b]), np.nan) for a, b in zip(src, dst, strict=True)])
        p95_eff = np.fmax(p95, fc)
        q = path_quality(p95_eff, x["loss"], x["bw_util"], x["retrans"], x["jitter_ms"], profile)
    else:
        q = combine(u, DEFAULT_MODEL.weights(profile))  # path_quality's last step, on the shared utilities
    q = q.astype(np.float32)
    if profile in BOTH_WAYS:  # traffic both ways: a path is as good as its worse direction
        q = worse_direction(q, src, dst)
    loss, probes, end, gbps = x["loss"], cols.column("count", rows), cols.column("end", rows), cols.column("gbps", rows)
    aging = ages_of(cols, rows, now, freshness)
    if aging is not None:
        age, stale = aging
        q = aged_quality(q, age, freshness).astype(np.float32)
        if stale.any():
            p95, p95_eff, loss, probes, gbps = (np.where(stale, np.nan, v) for v in (p95, p95_eff, loss, probes, gbps))
    shape = shape_of(cols, rows, node_ids, node_racks, rack_aliases)
    bw = cols.cols["bw_util"]
    util = np.where(shape.local >= 0, bw[np.maximum(shape.local, 0)] if bw.size else np.nan, np.nan)
    node_q = mean_by_group(shape.ent_col, q[shape.ent_row], len(node_ids)).astype(np.float32)
    node_q = np.where(np.isnan(node_q), rack_node_q(shape, q), node_q).astype(np.float32)
    return PathTable(
        q=q, p95=p95, p95_eff=p95_eff, loss=loss, probes=probes,
        end=end, path_nodes=shape.path_nodes, by_ep=shape.by_ep,
        node_q=node_q, headroom=np.where(np.isnan(util), 1.0, 1.0 - util), history=(cols, rows),
        node_rack=shape.node_rack, to_racks=shape.to_racks, rack_of=shape.rack_of, rack_index=shape.rack_index,
        gbps=gbps,
    )


def ends_table(cols: PathColumns, node_ids: list[str], node_racks: list[str] | None = None,
               rack_aliases: list[str] | None = None) -> PathTable:
    """A table of the paths' latest window ends only (``gather("end", ...)`` as
    :func:`build_path_table` gives it; no profile's quality, no values besides): what a rescoring
    that needs no scores reads to know which windows its tasks have seen."""
    rows, _, _ = cols.quality_inputs()
    shape = shape_of(cols, rows, node_ids, node_racks, rack_aliases)
    return PathTable(q=None, p95=None, p95_eff=None, loss=None, probes=None, end=cols.column("end", rows),
                     path_nodes=shape.path_nodes, by_ep=shape.by_ep, node_q=None, headroom=None,
                     node_rack=shape.node_rack, to_racks=shape.to_racks, rack_of=shape.rack_of,
                     rack_index=shape.rack_index)


def path_losses(cols: PathColumns, node_ids: list[str], node_racks: list[str] | None = None,
                rack_aliases: list[str] | None = None, now: float | None = None,
                freshness: Freshness | None = None, rule: FailureRule | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(path_nodes, loss, observer, evidence) as :func:`build_path_table` gives the first two (a stale
    path's loss NaN), without any profile's quality: what failures.health reads. ``observer``: the code
    of the source that probed each path; ``evidence`` (with ``rule`` and ``now``, else None): whether its
    loss may count towards a failure (core.failures.path_evidence); with them too, a path whose latest
    window is a grace period behind the newest of any path is unknown (its loss NaN)."""
    rows, x, _ = cols.quality_inputs()
    loss = x["loss"]
    aging = ages_of(cols, rows, now, freshness)
    if aging is not None and aging[1].any():
        loss = np.where(aging[1], np.nan, loss)
    evidence = None
    if rule is not None and now is not None and rows.size:
        evidence = path_evidence(cols.column("count", rows), np.isfinite(cols.answered_end[rows]),
                                 now - cols.hist_first[rows], rule)
        # a path whose windows stopped while others' go on (its prober is silent: a dark NIC, a dead
        # agent) says nothing about now, either way: unknown once it is a grace period behind
        end = cols.column("end", rows)
        if np.isfinite(end).any():
            with np.errstate(invalid="ignore"):
                loss = np.where(end < np.nanmax(end) - rule.grace_s, np.nan, loss)
    shape = shape_of(cols, rows, node_ids, node_racks, rack_aliases)
    return shape.path_nodes, loss, cols.src[rows], evidence


def aged_to(now: float | None, freshness: Freshness | None) -> float | None:
    """The time a path table is aged to for a view at ``now``: in steps of 1/20 of the aging span
    (a table is built again at most 20 times as its paths age); None without aging."""
    fr = freshness
    step = max((fr.stale_s - fr.fresh_s) / 20.0, 1.0) if fr is not None and math.isfinite(fr.stale_s) else 0.0
    return None if fr is None or now is None else (math.floor(now / step) * step if step else now)


def ages_of(cols: PathColumns, rows: np.ndarray, now: float | None, freshness: Freshness | None):
    """:func:`_ages` of the latest rtt windows at ``rows`` (quality_inputs' rows), once per write of the
    columns and time: the health check and every profile's table share them (read-only)."""
    key = (cols.writes, cols.n, len(cols.names), now, freshness)
    if cols.aging is None or cols.aging[0] != key:
        aging = _ages(cols.column("end", rows), now, freshness)
        for a in aging or ():
            a.flags.writeable = False
        cols.aging = (key, aging)
    return cols.aging[1]


def _ages(end: np.ndarray, now: float | None, freshness: Freshness | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(each path's age, whether it is stale) from its latest rtt window's ``end``; None without aging."""
    if now is None or freshness is None or not end.size:
        return None
    age = np.where(np.isnan(end), 0.0, now - end)  # a path without rtt windows has no age to judge
    return age, freshness.confidence(age) <= 0
