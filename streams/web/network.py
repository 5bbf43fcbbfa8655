"""GET /network/nodes[/{node}] and /network/paths[/{src}/{dst}]: the network view, answered by the
worker that owns the `netstate` table."""

from __future__ import annotations

import math
import time

import numpy as np
from faust.web import Request, Response

from core.quality import DEFAULT_MODEL, DIMENSIONS, Freshness, QualityModel, aged_quality
from schemas.api import ErrorBody, NodeAnswer, PathAnswer
from streams.adapters.network import path_quality_table, stat, window_span
from streams.web.base import Resource
from streams.web.params import check_ids

DEFAULT_FRESHNESS = Freshness()


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6)


def path_answer(path: dict, nodes: dict[str, dict], now: float, model: QualityModel = DEFAULT_MODEL,
                freshness: Freshness = DEFAULT_FRESHNESS) -> PathAnswer:
    """The path's statistics and its quality as the scheduler scores it now: drawn towards unknown as
    its latest window ages, null once stale (``freshness`` says which, ``confidence`` how much)."""
    x, u, q = path_quality_table([path], nodes, model)
    start, end = window_span([path])
    age = now - end if end is not None else math.nan
    judged = 0.0 if end is None else age  # no window time: no age to judge (as the scheduler's path table)
    aged = {name: float(aged_quality(v[0], judged, freshness)) for name, v in q.items()}
    return PathAnswer(
        src=path["src"], dst=path["dst"], quality=_num(aged["balanced"]),
        quality_by_profile={name: _num(v) for name, v in aged.items()},
        dimensions={d: _num(u[0, i]) for i, d in enumerate(DIMENSIONS)},
        inputs={k: _num(v[0]) for k, v in x.items()}, metrics=path["metrics"],
        window_start=_num(start), window_end=_num(end), age_s=_num(age),
        freshness=freshness.state(judged), confidence=round(float(freshness.confidence(judged)), 6),
    )


def _freshness(settings) -> Freshness:
    return Freshness(settings.path_fresh_seconds, settings.path_stale_seconds)


def node_answer(node: str, local: dict | None, out_paths: list[dict], nodes: dict[str, dict], now: float,
                model: QualityModel = DEFAULT_MODEL) -> NodeAnswer:
    """A node's summary: NIC utilisation, retransmissions, mean quality to its peers."""
    _, _, q = path_quality_table(out_paths, nodes, model)
    qb = q["balanced"]
    known = qb[~np.isnan(qb)]
    start, end = window_span([local] + out_paths)
    return NodeAnswer(
        node=node, bw_util=_num(stat(local, "bw_util", "mean")), retrans_rate=_num(stat(local, "retrans_rate", "mean")),
        mean_quality_to_peers=_num(float(known.mean())) if known.size else None, peers=len(out_paths),
        worst_peer=out_paths[int(np.nanargmin(qb))]["dst"] if known.size else None,
        metrics=(local or {}).get("metrics", {}), window_start=_num(start), window_end=_num(end), age_s=_num(now - end),
    )


def network_index(net) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """(node -> its node-local record, node -> its outgoing path records)."""
    recs = net.records()
    local = {r["src"]: r for r in recs if r["dst"] == ""}
    by_src: dict[str, list[dict]] = {}
    for r in recs:
        if r["dst"]:
            by_src.setdefault(r["src"], []).append(r)
    return local, by_src


class NetworkNode(Resource):
    routed = "net"

    async def get(self, request: Request, node: str) -> Response:
        if err := check_ids(node=node):
            return self.answer(err, 400)
        local, by_src = network_index(self.ctx.net)
        if node not in local and node not in by_src:
            return self.answer(ErrorBody(error="unknown node", node=node), 404)
        return self.answer(node_answer(node, local.get(node), by_src.get(node, []), local, time.time()))


class NetworkNodes(Resource):
    routed = "net"

    async def get(self, request: Request) -> Response:
        local, by_src = network_index(self.ctx.net)
        now = time.time()
        return self.paged(request, sorted(set(local) | set(by_src)),
                          lambda n: node_answer(n, local.get(n), by_src.get(n, []), local, now))


class NetworkPath(Resource):
    routed = "net"

    async def get(self, request: Request, src: str, dst: str) -> Response:
        if err := check_ids(src=src, dst=dst):
            return self.answer(err, 400)
        path = self.ctx.net.get(src, dst)
        if path is None:
            return self.answer(ErrorBody(error="unknown path", src=src, dst=dst), 404)
        local, _ = network_index(self.ctx.net)
        return self.answer(path_answer(path, local, time.time(), freshness=_freshness(self.ctx.settings)))


class NetworkPaths(Resource):
    routed = "net"

    async def get(self, request: Request) -> Response:
        src = request.query.get("src")
        if src is not None and (err := check_ids(src=src)):
            return self.answer(err, 400)
        local, by_src = network_index(self.ctx.net)
        paths = sorted((p for ps in by_src.values() for p in ps if src is None or p["src"] == src),
                       key=lambda p: (p["src"], p["dst"]))
        now = time.time()
        fr = _freshness(self.ctx.settings)
        return self.paged(request, paths, lambda p: path_answer(p, local, now, freshness=fr))
