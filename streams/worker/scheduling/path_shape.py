"""The shape of a path table: what it derives from which paths and nodes there are, not from their
values — each endpoint's node-level paths, each node's rack code, each source's path row towards
every rack (path_table.PathTable reads them). Built once while no path or name is added and the
nodes stay the same, and kept on the columns (``PathColumns.shapes``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streams.adapters.network import PathColumns


@dataclass(frozen=True)
class _Shape:
    """What a path table derives from which paths and nodes there are, not from their values: built
    once while no path or name is added and the nodes stay the same (kept on the columns)."""

    ent_row: np.ndarray  # every use of a path by a node (_entries)
    ent_col: np.ndarray
    by_ep: dict
    path_nodes: np.ndarray
    local: np.ndarray  # int64[N] each node's node-local row (-1: none)
    node_rack: np.ndarray
    to_racks: dict
    rack_of: dict
    rack_rows: np.ndarray  # the rack-level paths, and the code of the rack each starts at (-1: none)
    rack_src: np.ndarray
    racks: int
    rack_index: dict = field(default_factory=dict)  # filled by PathTable._rack_row, shared by the tables


def shape_of(cols: PathColumns, rows: np.ndarray, node_ids: list[str], node_racks: list[str] | None,
           rack_aliases: list[str] | None) -> _Shape:
    """The shape of the paths at ``rows`` (quality_inputs' rows) over these nodes (``node_racks``: each
    node's rack endpoint, None: none), once while no path or name is added."""
    node_racks = node_racks or [""] * len(node_ids)
    key = (cols.n, len(cols.names), tuple(node_ids), tuple(node_racks), tuple(rack_aliases or ()))
    hit = cols.shapes.get(key)
    if hit is not None:
        return hit
    src, dst = cols.src[rows], cols.dst[rows]
    pos = _node_rows(cols, node_ids)
    ent_row, ent_col, ent_ep = _entries(cols, src, dst, pos)
    local = np.array([cols.rows.get((cols.codes.get(n, -1), cols.empty), -1) for n in node_ids], np.int64)
    shape = _Shape(ent_row, ent_col, _by_endpoint(cols.names, ent_row, ent_col, ent_ep),
                   np.stack([pos[src], pos[dst]], axis=1).reshape(-1, 2), local,
                   **_racks(cols, src, dst, node_ids, node_racks, rack_aliases))
    if len(cols.shapes) >= 4:  # paths were added, or another node list: the old shapes are done with
        cols.shapes.clear()
    cols.shapes[key] = shape
    return shape


def _racks(cols: PathColumns, src: np.ndarray, dst: np.ndarray, node_ids: list[str], node_racks: list[str],
           rack_aliases: list[str] | None = None) -> dict:
    """The rack-level side of the table: each node's rack code, each source's path row towards every
    rack, and which rack-level paths start at a rack (their mean quality stands for the nodes of a
    rack without node-level paths). A rack probed under its unscoped alias counts as that rack when
    the alias names one rack only."""
    names = sorted({r for r in node_racks if r})
    code = {r: i for i, r in enumerate(names)}
    alias_of: dict[str, set[str]] = {}
    for scoped, alias in zip(node_racks, rack_aliases or node_racks, strict=True):
        if scoped and alias and alias != scoped:
            alias_of.setdefault(alias, set()).add(scoped)
    aliases = {a: next(iter(s)) for a, s in alias_of.items() if len(s) == 1 and a not in code}
    code.update({a: code[s] for a, s in aliases.items()})
    node_rack = np.array([code.get(r, -1) for r in node_racks], np.int64)
    dst_rack = np.array([code.get(n, -1) for n in cols.names], np.int64)[dst] if names else np.full(dst.size, -1)
    rows = np.flatnonzero(dst_rack >= 0)  # the rack-level paths
    srcs, inv = np.unique(src[rows], return_inverse=True)
    towards = np.full((srcs.size, len(names)), -1, np.int64)
    towards[inv, dst_rack[rows]] = rows
    to_racks = {cols.names[int(c)]: towards[k] for k, c in enumerate(srcs)}
    for a, scoped in aliases.items():  # a rack's own paths probed under its alias
        if a in to_racks and scoped not in to_racks:
            to_racks[scoped] = to_racks[a]
    src_rack = np.array([code.get(cols.names[int(c)], -1) for c in srcs], np.int64)[inv] if rows.size else rows
    rack_of = {n: r for n, r in zip(node_ids, node_racks, strict=True) if r}
    return {"node_rack": node_rack, "to_racks": to_racks, "rack_of": rack_of, "rack_rows": rows,
            "rack_src": src_rack, "racks": len(names)}


def rack_node_q(shape: _Shape, q: np.ndarray) -> np.ndarray:
    """float[N] a node's mean quality from its rack's paths (NaN: no rack, or none known)."""
    rows, src_rack = shape.rack_rows, shape.rack_src
    ok = (src_rack >= 0) & ~np.isnan(q[rows])
    rack_sum = np.bincount(src_rack[ok], q[rows][ok].astype(np.float64), shape.racks)
    rack_cnt = np.bincount(src_rack[ok], minlength=shape.racks)
    with np.errstate(invalid="ignore"):
        rack_q = np.where(rack_cnt > 0, rack_sum / np.maximum(rack_cnt, 1), np.nan)
    node_rack = shape.node_rack
    return np.where(node_rack >= 0, rack_q[np.maximum(node_rack, 0)] if shape.racks else np.nan, np.nan)


def _node_rows(cols: PathColumns, node_ids: list[str]) -> np.ndarray:
    """int64[names]: the node row of every interned name (-1 where the name is not a node)."""
    pos = np.full(len(cols.names), -1, np.int64)
    for i, node in enumerate(node_ids):
        code = cols.codes.get(node)
        if code is not None:
            pos[code] = i
    return pos


def _entries(cols: PathColumns, src: np.ndarray, dst: np.ndarray, pos: np.ndarray):
    """(path row, node column, endpoint code) of every use of a path, sorted by endpoint: each path
    serves the node at its source towards the endpoint at its destination, and the reverse direction
    when that one is not measured itself."""
    k = len(cols.names)
    reverse_measured = np.isin(dst * k + src, src * k + dst)
    idx = np.arange(src.size)
    fwd = pos[src] >= 0
    rev = (pos[dst] >= 0) & ~reverse_measured
    ent_row = np.concatenate([idx[fwd], idx[rev]])
    ent_col = np.concatenate([pos[src][fwd], pos[dst][rev]])
    ent_ep = np.concatenate([dst[fwd], src[rev]])
    order = np.argsort(ent_ep, kind="stable")
    return ent_row[order], ent_col[order], ent_ep[order]


def _by_endpoint(names: list[str], ent_row, ent_col, ent_ep) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if ent_ep.size == 0:  # no path touches a known node yet (a fresh cluster)
        return {}
    cuts = np.flatnonzero(np.r_[True, ent_ep[1:] != ent_ep[:-1]])
    ends = np.r_[cuts[1:], ent_ep.size]
    return {names[int(ent_ep[a])]: (ent_col[a:b], ent_row[a:b]) for a, b in zip(cuts, ends, strict=True)}
