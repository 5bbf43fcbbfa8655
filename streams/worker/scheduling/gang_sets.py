"""Candidate member sets of a gang for the seconds rule (seconds.Costing): the sets that start now
(each rack, each site, across sites led from each site) and those that start later (each rack's or
site's nodes that free first), what their members' paths measure (the worst pair, the narrowest),
and what a set is called in a decision."""

from __future__ import annotations

import numpy as np

from core.ect import ONE_RACK
from core.failures import LOST_LOSS
from core.groups import gang_firsts, group_firsts
from core.pairs import rack_pairs, sets_worst_narrow
from streams.adapters.inventory import NodeView
from streams.worker.scheduling.bandwidth import booked_between, booked_rack_pairs, left, rack_codes


def named(members: np.ndarray, nodes: NodeView, rack: np.ndarray, site: np.ndarray) -> str:
    """What a set of nodes is called: its rack, else its site, when they name one; else the nodes."""
    first = int(members[0])
    if len(set(rack[members].tolist())) == 1 and nodes.racks and nodes.racks[first]:
        return nodes.racks[first]
    if len(set(site[members].tolist())) == 1 and len(nodes.sites) and nodes.sites[first]:
        return str(nodes.sites[first])
    return ", ".join(nodes.ids[int(m)] for m in sorted(members.tolist()))


def now_sets(fits: np.ndarray, g: int, rack: np.ndarray, site: np.ndarray, speed: np.ndarray, left: np.ndarray,
          p95_from=None):
    """Candidate member sets (node rows; int64[g] or blocks int64[k, g]) of a gang of ``g`` among the
    nodes that ``fits`` now: each rack
    that holds it, each site (racks with the most fitting nodes first), and across sites one set led
    from each site: its nodes first, then the others by measured p95 RTT from its lead
    (``p95_from(node)``: float[N], NaN unmeasured, taken last; None: by stock). Inside a group: faster
    cards, then best fit, then the lower index."""
    ok, r_count, s_count, by_site, by_rack, pool = gang_firsts(fits, g, rack, site, speed, left, p95_from is None)
    if ok.size < g:
        return
    sites = np.flatnonzero(s_count)
    if sites.size < 2:  # one site: its set (below) is the pool's first — the same nodes in the same order
        yield by_site[0]
    elif p95_from is None:
        # the first of ``order`` below: the most stocked site's, rack's, faster cards, best fit, index
        yield pool[0]
    elif (s_count[sites] < g).any():
        speed, left = np.asarray(speed, np.float64), np.asarray(left, np.float64)
        r_stock, s_stock = r_count[rack], s_count[site]
        order = ok[np.lexsort((ok, left[ok], -speed[ok], -r_stock[ok], -s_stock[ok]))]  # most stocked site, rack first
        rank = np.empty(len(fits), np.int64)
        rank[order] = np.arange(order.size)
        for s in sites[s_count[sites] < g].tolist():  # a site that holds the gang has its own set below
            lead = int(order[site[order] == s][0])
            rtt = np.asarray(p95_from(lead), np.float64)[order]
            far = np.where(site[order] == s, -1.0, np.where(np.isnan(rtt), np.inf, rtt))
            yield order[np.lexsort((rank[order], far))][:g]
    # a site's nodes in ``order``'s ranks; a rack's by faster cards, best fit, index; groups by code,
    # ascending (each level's sets as one int64[k, g] block: core.groups)
    for block in (by_site, by_rack):
        if len(block):
            yield block


def later_sets(free_at: np.ndarray, g: int, rack: np.ndarray, site: np.ndarray,
                now: float) -> tuple[np.ndarray, np.ndarray]:
    """(start float64[K], members int64[K, g]) for each rack, then each site (ascending codes), whose
    ``g`` nodes that free first (``free_at``; ties: the lower index) do so after ``now``: the gang in
    one rack or one site, later."""
    ok = np.flatnonzero(np.isfinite(free_at))
    now_ok = ok[free_at[ok] <= now]
    blocks = []
    for level in (rack, site):  # a group with g nodes free now starts now: none of its sets is later
        full = np.bincount(level[now_ok], minlength=int(level.max(initial=-1)) + 1) >= g
        blocks.append(group_firsts(ok[~full[level[ok]]], level, free_at[None, :], g))
    sets = np.concatenate(blocks) if ok.size else np.zeros((0, g), np.int64)
    start = free_at[sets[:, -1]] if len(sets) else np.zeros(0)
    later = start > now
    return start[later], sets[later]


def near_sets(net, wait: np.ndarray, g: int, leads: int = 8) -> list[np.ndarray]:
    """Member sets by measured closeness, for when some nodes report no rack (every node saying its
    rack, the rack sets cover it): for each of the ``leads`` nodes of least ``wait`` (finite: a node
    that can take a worker then), it and the ``g - 1`` others nearest it by measured p95 RTT
    (``net.from_node``; ties: the sooner free, then the lower index)."""
    ok = np.flatnonzero(np.isfinite(wait))
    if ok.size < g or g < 2:
        return []
    out = []
    for lead in ok[np.lexsort((ok, wait[ok]))][:leads].tolist():
        rtt = net.from_node("p95", lead)[ok].astype(np.float64)
        rtt = np.where(ok == lead, -np.inf, np.where(np.isnan(rtt), np.inf, rtt))
        out.append(ok[np.lexsort((ok, wait[ok], rtt))][:g])
    return out


def sets_paths(net, sets: np.ndarray, booked: dict, sees_network: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(worst pair RTT, narrowest pair Gbit/s, whether every pair is measured) of each set of members
    (``sets`` int64[K, g] node rows) as ``net`` (net_inputs.NetworkInputs) measures them: an unmeasured
    pair at the worst measured one of the block, or one rack's when none is; bandwidth the slower link
    times the receiver's NIC headroom less what placements ``booked`` on the racks' paths
    (bandwidth.py), at most one 64 MiB window per round trip; nothing between members whose path lost
    (nearly) every probe either way (a dark path: core.failures). Without ``sees_network`` (the
    compute-only baseline) every set as if in one rack."""
    k, g = sets.shape
    if g < 2:
        return np.zeros(k), np.full(k, np.inf), np.ones(k, bool)
    if not sees_network:
        return np.full(k, ONE_RACK.ideal_rtt_ms), np.full(k, ONE_RACK.ideal_gbps), np.zeros(k, bool)
    t = net.table
    src, towards, own = t.sources(net.nodes.ids)
    if own[sets].any():  # a member with node-level paths of its own (rare): the array form reads them
        rtt, link = pairs_arrays(net, sets, booked)
    else:
        codes = rack_codes(t) if booked else {}
        keys, vals = booked_rack_pairs(booked, codes) if booked else (None, np.zeros(0))
        rtt, link = rack_pairs(sets, src, towards, t.node_rack, t.p95,
                               t.loss if t.any_at_least("loss", LOST_LOSS) else None, LOST_LOSS, net.nodes.link_gbps,
                               t.headroom, keys, vals, len(codes))
    return sets_worst_narrow(rtt, link, ONE_RACK.ideal_rtt_ms)


def pairs_arrays(net, sets: np.ndarray, booked: dict) -> tuple[np.ndarray, np.ndarray]:
    """(RTT ms, usable Gbit/s), float64[K, g, g], from each member to each of every set, in array
    steps: any member's paths, node-level ones too (core.pairs.rack_pairs, the compiled pass over
    rack-level ones, is tested against it)."""
    rtt = net.among("p95", sets)  # [K, g, g]: from member i to member j
    a = np.broadcast_to(sets[:, :, None], rtt.shape).ravel()
    b = np.broadcast_to(sets[:, None, :], rtt.shape).ravel()
    # not bounded by the member pairs' measured throughput: a running gang's own traffic is in what
    # its current paths measure and not in another set's, so every move looked worth it (issue 53's
    # E1 replay: ~4,500 moves per 1,000 jobs); what placements book stands for the others' traffic
    link = net.between_nodes(a, b, measured=False).reshape(rtt.shape).astype(np.float64)
    if booked:
        t = net.table
        nr = t.node_rack
        link = left(link, booked_between(booked, rack_codes(t), nr[a], nr[b]).reshape(rtt.shape))
    if net.table.any_at_least("loss", LOST_LOSS):  # some path is dark: none between members
        lost = net.among("loss", sets)
        with np.errstate(invalid="ignore"):
            link = np.where((lost >= LOST_LOSS) | (np.swapaxes(lost, 1, 2) >= LOST_LOSS), 0.0, link)
    return rtt, link
