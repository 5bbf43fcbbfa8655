"""Decisions and reschedule events assembled from the arrays a placement or a migration used:
the ranked candidates with their compute and network parts, the filters' reasons, the fallbacks and
the compute-only counterfactual."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from core.listing import Listing, listing
from core.placement import Placement
from core.rounding import round_places
from core.scoring import FEASIBLE, REASONS, ScoringInputs, load_scores
from schemas.sched import Candidate, Decision, Fallback, ScoreBreakdown, Task
from streams.adapters.inventory import NodeView
from streams.adapters.tasks import load_gb

TOP_CANDIDATES = 10  # candidates listed per decision
REJECTED_LISTED = 20  # nodes named per filter reason in a decision's ``rejected`` (all are counted)


@dataclass
class Scored:
    """One task's scores on every node: composite (energy blended in), and its two parts."""

    alpha: float
    composite: np.ndarray  # float[N], -inf where infeasible
    compute: np.ndarray  # float[N]
    network: np.ndarray  # float[N]
    # the data load time's score at some nodes (rows in, float[k] out; None: it loads nothing), read
    # for the candidates a decision lists only
    load: Callable[[np.ndarray], np.ndarray | None] | None = None


def loads_at(x: ScoringInputs, j: int, rows: dict) -> Callable[[np.ndarray], np.ndarray | None]:
    """:attr:`Scored.load` of task ``j`` of the scoring inputs: its load scores at the nodes asked
    (core.scoring.load_scores), read from ``rows``: {(data endpoint, GB): scores on every node}, kept
    with the inputs — the tasks of a burst that load as much from one store read one row (a score at
    some nodes is the row's there: tested)."""
    key = (int(x.data_ep[j]), float(x.data_gb[j]))

    def at(nodes: np.ndarray) -> np.ndarray | None:
        if key not in rows:
            rows[key] = load_scores(x, j)
        row = rows[key]
        return None if row is None else row[np.asarray(nodes, np.int64)]

    return at


def finite(v) -> float | None:
    v = float(v)
    return round(v, 4) if math.isfinite(v) else None


class Later:
    """The candidates of a burst's decisions, built once its placements are made: each decision holds
    an empty list that :meth:`fill` fills in place (a copy of the decision shares it). Between two
    placements the scheduler's array work evicts the Python that builds them from the CPU's caches:
    ten candidates took 32 µs inside a burst at 5,000 nodes and 23 µs built one decision after another."""

    def __init__(self) -> None:
        self._rows: list[tuple[list, list[tuple]]] = []

    def add(self, rows: list[tuple]) -> list:
        out: list = []
        self._rows.append((out, rows))
        return out

    def fill(self) -> None:
        for out, rows in self._rows:
            out[:] = trusted_rows(Candidate, rows)
        self._rows.clear()


def candidates(s: Scored, nodes: NodeView, with_energy: bool, listed: Listing, later: Later | None = None
               ) -> list[Candidate]:
    """The ``TOP_CANDIDATES`` nodes of best composite (``listed.top``), each with its parts rounded to 4
    places (``listed.table``: compute, composite, then network when alpha < 1 and energy when the task
    weighs it, as :func:`listing_of` asks them) and its load score; with ``later``, a list it fills."""
    idx = listed.top
    if not idx.size:
        return []
    at = None if s.load is None else s.load(idx)
    table = listed.table.tolist()
    compute, composite = table[0], table[1]
    network = table[2] if s.alpha < 1 else [0.0] * idx.size
    energy = table[-1] if with_energy else [None] * idx.size
    load = [None] * idx.size if at is None else round_places(np.asarray(at), 4).tolist()
    alpha = float(s.alpha)
    rows = [(nodes.ids[i], c, w, alpha, x, e, ld)
            for i, c, w, x, e, ld in zip(idx.tolist(), compute, network, composite, energy, load, strict=True)]
    return trusted_rows(Candidate, rows) if later is None else later.add(rows)


def listing_of(s: Scored, nodes: NodeView, with_energy: bool, reasons: np.ndarray, co_scores: np.ndarray | None,
               peers: int) -> Listing:
    """One pass over the nodes for what a decision lists (core.listing): the candidates and their parts,
    the compute-only choice (``co_scores``: the task's scores at alpha 1; None: not asked) and the
    rejected nodes."""
    parts = [s.compute, s.composite] + ([s.network] if s.alpha < 1 else []) + ([nodes.energy] if with_energy else [])
    return listing(s.composite, parts, TOP_CANDIDATES, reasons, REJECTED_LISTED, co_scores, peers)


def rejections(listed: Listing, reasons: np.ndarray, nodes: NodeView) -> tuple[dict[str, str], dict[str, int]]:
    """(node -> reason, reason -> count) of the nodes a filter rejected: every rejected node counted,
    the first ``REJECTED_LISTED`` of each reason (by node order) named — a decision on a cluster of
    thousands of full nodes stays a small message (Kafka's default limit is 1 MB)."""
    rows = listed.rejected
    named = {nodes.ids[i]: REASONS[r] for i, r in zip(rows.tolist(), reasons[rows].tolist(), strict=True)}
    return named, {REASONS[r]: n for r, n in enumerate(listed.counts.tolist()) if r != FEASIBLE and n}


_FIELDS: dict[type, tuple[dict, frozenset, tuple]] = {}


def trusted(cls: type[BaseModel], **values) -> BaseModel:
    """``cls.model_construct(**values)`` — a model of values already checked, not validated again —
    for a model without aliases, post-init or extra fields, in a few Python steps. A decision and its
    candidates are built on every task: between two of them the scheduler's numpy work evicts
    pydantic's validators from the CPU's caches, and one validation of ten candidates took 60 µs
    where it takes 7 µs warm (measured in a burst at 5,000 nodes), model_construct's loop over fields
    9 µs for a decision. The same ``__dict__`` (in field order) and fields-set as model_construct; a
    required field missing or an unknown one is an error."""
    template, required, factories = _FIELDS.get(cls) or _fields_of(cls)
    d = dict(template)
    d.update(values)
    if len(d) != len(template) or not required <= values.keys():
        raise TypeError(f"{cls.__name__}: fields missing or unknown: "
                        f"{sorted((required - values.keys()) | (values.keys() - template.keys()))}")
    for name, factory in factories:
        if name not in values:
            d[name] = factory()
    return _instance(cls, d, set(values))


def trusted_rows(cls: type[BaseModel], rows: list[tuple]) -> list[BaseModel]:
    """:func:`trusted` of each row, a value for every field of ``cls`` in field order (a decision's ten
    candidates): the fields are checked once, not per row."""
    template = (_FIELDS.get(cls) or _fields_of(cls))[0]
    names = tuple(template)
    if any(len(row) != len(names) for row in rows):
        raise TypeError(f"{cls.__name__}: a row is not one value per field {names}")
    every = set(names)
    return [_instance(cls, dict(zip(names, row, strict=False)), every.copy()) for row in rows]  # lengths: checked


def _instance(cls: type[BaseModel], values: dict, fields_set: set) -> BaseModel:
    """A ``cls`` of ``values`` (its ``__dict__``, in field order) as model_construct leaves one: pydantic's
    slots set through their descriptors (object.__setattr__ looks each name up first)."""
    m = cls.__new__(cls)
    _SET_DICT(m, values)
    _SET_FIELDS(m, fields_set)
    _SET_EXTRA(m, None)
    _SET_PRIVATE(m, None)
    return m


_SET_DICT = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


def _fields_of(cls: type[BaseModel]) -> tuple[dict, frozenset, tuple]:
    fields = cls.model_fields
    if cls.__pydantic_post_init__ or cls.model_config.get("extra") == "allow" or \
            any(f.alias or f.validation_alias for f in fields.values()):
        raise TypeError(f"{cls.__name__}: build it with model_construct")
    template = {name: None if f.is_required() or f.default_factory else f.default for name, f in fields.items()}
    required = frozenset(name for name, f in fields.items() if f.is_required())
    factories = tuple((name, f.default_factory) for name, f in fields.items() if f.default_factory)
    _FIELDS[cls] = (template, required, factories)
    return _FIELDS[cls]


def decision(task: Task, profile: str, s: Scored, nodes: NodeView, placement: Placement, reasons: np.ndarray,
             co_scores: np.ndarray | None, version: int, now: float, audit: bool = True,
             later: Later | None = None) -> Decision:
    """The decision message; without ``audit`` (the replay) no candidates, no rejected nodes and no
    compute-only choice. ``co_scores``: the task's scores at alpha 1 (what it would get by compute only);
    ``later``: its candidates are built by ``later.fill()``."""
    w = task.cost_sensitivity
    listed = listing_of(s, nodes, w > 0, reasons, co_scores, task.peers) if audit else None
    rejected, counts = rejections(listed, reasons, nodes) if audit else ({}, {})
    chosen = [nodes.ids[i] for i in placement.nodes]
    compute_only = listed.compute_only.tolist() if audit else []
    co = compute_only[0] if compute_only else -1
    # built here from checked values: not validated (a rejected-node map of a large cluster costs
    # more to validate than the decision takes)
    return trusted(
        Decision, task_id=task.id, status="placed" if chosen else "unschedulable", nodes=chosen, alpha=s.alpha,
        network_profile=profile, candidates=candidates(s, nodes, w > 0, listed, later) if audit else [], rejected=rejected,
        rejected_counts=counts,
        fallbacks=[Fallback(node=nodes.ids[n] if n >= 0 else "", reason=r) for n, r in placement.fallbacks],
        compute_only_nodes=[nodes.ids[i] for i in compute_only], state_version=version,
        compute_only_composite=finite(s.composite[co]) if co >= 0 else None,
        compute_only_network_score=finite(s.network[co]) if co >= 0 and s.alpha < 1 else None,
        decided_at=now, task_type=task.type, submitted_at=task.submitted_at, cards=task.resources.cards,
        peers=task.peers, cost_sensitivity=w, team=task.team, load_gb=round(load_gb(task) * len(chosen), 6),
        command=task.command, time_limit_s=task.time_limit_s if chosen else None,
        expected_completion_s=round(placement.expected_s, 3) if chosen and math.isfinite(placement.expected_s) else None,
        staging=[],
        data_at=None, waits_for=[nodes.ids[i] for i in placement.waits_for] if not chosen else [],
    )


def breakdown(compute: float, network: float, composite: float, alpha: float) -> ScoreBreakdown:
    """A placement's worth before or after a move (network 0 at alpha 1, as in decisions)."""
    return ScoreBreakdown(compute_score=round(float(compute), 4),
                          network_score=0.0 if alpha >= 1 else round(float(network), 4),
                          composite=round(float(composite), 4))
