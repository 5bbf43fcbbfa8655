"""Candidate member sets of a gang for the seconds rule (seconds.Costing): the sets that start now
(each rack, each site, across sites led from each site) and those that start later (each rack's or
site's nodes that free first), and what a set is called in a decision."""

from __future__ import annotations

import numpy as np

from streams.adapters.inventory import NodeView


def named(members: np.ndarray, nodes: NodeView, rack: np.ndarray, site: np.ndarray) -> str:
    """What a set of nodes is called: its rack, else its site, when they name one; else the nodes."""
    first = int(members[0])
    if len(set(rack[members].tolist())) == 1 and nodes.racks and nodes.racks[first]:
        return nodes.racks[first]
    if len(set(site[members].tolist())) == 1 and len(nodes.sites) and nodes.sites[first]:
        return str(nodes.sites[first])
    return ", ".join(nodes.ids[int(m)] for m in sorted(members.tolist()))


def distinct(codes: np.ndarray) -> np.ndarray:
    """int64[K]: how many distinct codes each row of ``codes`` (int64[K, g]) holds."""
    s = np.sort(codes, axis=1)
    return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)


def now_sets(fits: np.ndarray, g: int, rack: np.ndarray, site: np.ndarray, speed: np.ndarray, left: np.ndarray,
          p95_from=None):
    """Candidate member sets (node rows; int64[g] or blocks int64[k, g]) of a gang of ``g`` among the
    nodes that ``fits`` now: each rack
    that holds it, each site (racks with the most fitting nodes first), and across sites one set led
    from each site: its nodes first, then the others by measured p95 RTT from its lead
    (``p95_from(node)``: float[N], NaN unmeasured, taken last; None: by stock). Inside a group: faster
    cards, then best fit, then the lower index."""
    ok = np.flatnonzero(fits)
    if ok.size < g:
        return
    r_stock = np.bincount(rack[ok], minlength=int(rack.max()) + 1)[rack[ok]]
    s_stock = np.bincount(site[ok], minlength=int(site.max()) + 1)[site[ok]]
    order = ok[np.lexsort((ok, left[ok], -speed[ok], -r_stock, -s_stock))]  # most stocked site, rack first
    sites, counts = np.unique(site[ok], return_counts=True)
    if p95_from is None or sites.size < 2:
        yield order[:g]
    else:
        rank = np.empty(len(fits), np.int64)
        rank[order] = np.arange(order.size)
        for s in sites[counts < g].tolist():  # a site that holds the gang has its own set below
            lead = int(order[site[order] == s][0])
            rtt = np.asarray(p95_from(lead), np.float64)[order]
            far = np.where(site[order] == s, -1.0, np.where(np.isnan(rtt), np.inf, rtt))
            yield order[np.lexsort((rank[order], far))][:g]
    # a site's nodes in ``order``; a rack's by faster cards, best fit, index; groups by code, ascending
    # (each level's sets as one int64[k, g] block)
    for block in (firsts(order[np.argsort(site[order], kind="stable")], site, g),
                  firsts(ok[np.lexsort((ok, left[ok], -speed[ok], rack[ok]))], rack, g)):
        if len(block):
            yield block


def firsts(by: np.ndarray, level: np.ndarray, g: int) -> np.ndarray:
    """int64[k, g]: the first ``g`` nodes of each group (``level`` codes) of ``by`` — node rows sorted by
    group, then by preference — that has ``g`` of them, groups in the order they come."""
    grp = level[by]
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]]) if by.size else by
    counts = np.diff(np.r_[starts, by.size])
    return by[starts[counts >= g][:, None] + np.arange(g)[None, :]]


def later_sets(free_at: np.ndarray, g: int, rack: np.ndarray, site: np.ndarray,
                now: float) -> tuple[np.ndarray, np.ndarray]:
    """(start float64[K], members int64[K, g]) for each rack, then each site (ascending codes), whose
    ``g`` nodes that free first (``free_at``; ties: the lower index) do so after ``now``: the gang in
    one rack or one site, later."""
    ok = np.flatnonzero(np.isfinite(free_at))
    blocks = [firsts(ok[np.lexsort((ok, free_at[ok], level[ok]))], level, g) for level in (rack, site)]
    sets = np.concatenate(blocks) if ok.size else np.zeros((0, g), np.int64)
    start = free_at[sets[:, -1]] if len(sets) else np.zeros(0)
    later = start > now
    return start[later], sets[later]
