"""What the kernel and the migration rules read of the network for the endpoints a set of tasks names,
gathered from a profile's path table (streams.worker.scheduling.path_table) over a node view."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.quality import DEFAULT_LINK_GBPS, HEADROOM_FLOOR, path_bandwidth_gbps
from streams.adapters.inventory import NodeView
from streams.worker.scheduling.path_table import PathTable


@dataclass
class NetworkInputs:
    """What the kernel and the migration rules read of the network, for the E endpoints the tasks
    name x N nodes; a node's own row as an endpoint (a gang's first member) through :meth:`from_node`."""

    quality: np.ndarray  # float32[E, N] (NaN unknown; a node to itself 100)
    bandwidth: np.ndarray  # float32[E, N] usable Gbit/s
    node_quality: np.ndarray  # float32[N]
    p95: np.ndarray  # float64[E, N] measured
    loss: np.ndarray  # float64[E, N]
    probes: np.ndarray  # float64[E, N]
    end: np.ndarray  # float64[E, N]
    table: PathTable | None = None
    nodes: NodeView | None = None
    endpoints: list[str] | None = None
    _shift: np.ndarray | None = None
    _rows: dict = field(default_factory=dict)  # (column, node) -> from_node's row

    @property
    def shift(self) -> np.ndarray:
        """float64[E, N] the detector's shift ratio of each endpoint's path (0: none; NaN: no path),
        gathered on first use (the migration rules read it, deciding does not)."""
        if self._shift is None:
            self._shift = self.table.gather("shift", self.endpoints, len(self.nodes.ids))
        return self._shift

    def from_node(self, name: str, node: int) -> np.ndarray:
        """[N] of one column (``q``, ``p95``, ``loss``, ``end``...) from node row ``node`` to every node
        (gathered once per inputs: read it, never write it)."""
        row = self._rows.get((name, node))
        if row is None:
            row = self.table.gather(name, [self.nodes.ids[node]], len(self.nodes.ids),
                                    np.float32 if name == "q" else np.float64)[0]
            if name == "q":
                row[node] = 100.0
            self._rows[(name, node)] = row
        return row

    def among(self, name: str, members) -> np.ndarray:
        """float64[U, U] of one column (``p95``, ``loss``...) between node rows ``members``, from each
        to each: ``from_node(name, m)[members]`` of every member, without gathering their rows
        (``members`` int64[K, U]: each set's, [K, U, U])."""
        return self.table.among(name, members, self.nodes.ids)

    def bandwidth_from(self, endpoint: str) -> np.ndarray:
        """float32[N] usable Gbit/s from ``endpoint`` to every node: its row when the tasks name it, else
        gathered as :func:`network_inputs` gathers one (a store holding a staged copy: staging.py)."""
        if self.endpoints and endpoint in self.endpoints:
            return self.bandwidth[self.endpoints.index(endpoint)]
        row = self._rows.get(("bandwidth", endpoint))
        if row is None:
            row = self._rows[("bandwidth", endpoint)] = _bandwidth(self.table, [endpoint], self.nodes)[0]
        return row

    def filled_quality(self, unknown: float) -> np.ndarray:
        """float64[N, N]: ``from_node("q", m)`` of every node m (100 to itself), unknown paths at
        ``unknown``: a gang's member-pair qualities (core.gang), gathered once per inputs."""
        hit = self._rows.get(("filled q", unknown))
        if hit is None:
            q = self.table.node_matrix("q", self.nodes.ids, np.float32).astype(np.float64)
            np.fill_diagonal(q, 100.0)
            hit = self._rows[("filled q", unknown)] = np.where(np.isnan(q), unknown, q)
        return hit

    def between_nodes(self, a, b, measured: bool = True) -> np.ndarray:
        """Usable Gbit/s from node rows ``a`` to node rows ``b`` (elementwise): the slower link, times
        the receiving node's NIC headroom, and (``measured``) no more than the path's measured
        throughput where a probe measures it (``bw_gbps``)."""
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        link = self.nodes.link_gbps
        out = (np.minimum(link[a], link[b]) * np.maximum(self.table.headroom[b], HEADROOM_FLOOR)).astype(np.float32)
        if measured and self.table.gbps is not None and np.isfinite(self.table.gbps).any() and a.size:
            for u in np.unique(a).tolist():
                at = a == u
                out[at] = np.fmin(out[at], self.from_node("gbps", u)[b[at]])
        return out


def network_inputs(pt: PathTable, endpoints: list[str], nodes: NodeView) -> NetworkInputs:
    n = len(nodes.ids)
    quality = pt.gather("q", endpoints, n, np.float32)
    for a, ep in enumerate(endpoints):
        if ep in nodes.index:  # a node is perfectly connected to itself
            quality[a, nodes.index[ep]] = 100.0
    p95 = pt.gather("p95", endpoints, n)
    return NetworkInputs(quality=quality, bandwidth=_bandwidth(pt, endpoints, nodes, p95),
                         node_quality=pt.node_q, p95=p95, loss=pt.gather("loss", endpoints, n),
                         probes=pt.gather("probes", endpoints, n), end=pt.gather("end", endpoints, n),
                         table=pt, nodes=nodes, endpoints=list(endpoints))


def _bandwidth(pt: PathTable, endpoints: list[str], nodes: NodeView, p95: np.ndarray | None = None) -> np.ndarray:
    """float32[E, N] usable Gbit/s from each endpoint to each node: the slower link, the receiver's
    headroom, one window per round trip, and no more than a probe measured on the path."""
    n = len(nodes.ids)
    ep_link = np.array([nodes.link_gbps[nodes.index[ep]] if ep in nodes.index else DEFAULT_LINK_GBPS
                        for ep in endpoints], np.float32)
    p95 = pt.gather("p95", endpoints, n) if p95 is None else p95
    bandwidth = path_bandwidth_gbps(nodes.link_gbps, ep_link, pt.headroom, p95)
    if pt.gbps is not None and np.isfinite(pt.gbps).any():  # no more than a probe measured on the path
        bandwidth = np.fmin(bandwidth, pt.gather("gbps", endpoints, n)).astype(np.float32)
    return bandwidth
