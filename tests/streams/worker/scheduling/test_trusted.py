"""decision.trusted: a decision and its candidates built without pydantic's per-field loop are the
models model_construct builds, field for field; a burst's candidates built after its placements are
those built at once."""

from types import SimpleNamespace

import numpy as np
import pytest

from schemas.sched import Candidate, Decision, Fallback
from streams.worker.scheduling import decision as dec
from streams.worker.scheduling.decision import trusted, trusted_rows

DECISION = dict(task_id="t1", status="placed", nodes=["n1", "n2"], alpha=0.2, network_profile="bandwidth",
                candidates=[], rejected={"n3": "insufficient_cards"}, rejected_counts={"insufficient_cards": 1},
                fallbacks=[Fallback(node="", reason="r")], compute_only_nodes=["n2"], state_version=7, decided_at=5.0,
                cards=8, peers=2, load_gb=1.5, expected_completion_s=12.0)


@pytest.mark.parametrize("cls,values", [
    (Decision, DECISION),
    (Decision, {k: DECISION[k] for k in ("task_id", "status", "alpha", "network_profile", "state_version",
                                         "decided_at")}),  # only the required ones: the defaults filled
    (Candidate, dict(node="n1", compute_score=71.5, network_score=0.0, alpha=1.0, composite=71.5,
                     energy_score=None, load_score=32.25)),
])
def test_trusted_is_model_construct(cls, values):
    got, want = trusted(cls, **values), cls.model_construct(**values)
    assert type(got) is cls and got == want
    assert list(got.__dict__) == list(want.__dict__)  # field order
    assert got.model_fields_set == want.model_fields_set == set(values)
    assert got.model_dump(mode="json") == want.model_dump(mode="json")
    assert got.model_dump_json() == want.model_dump_json()


def test_trusted_defaults_are_fresh_and_bad_fields_refused():
    a = trusted(Decision, **{k: DECISION[k] for k in ("task_id", "status", "alpha", "network_profile",
                                                      "state_version", "decided_at")})
    b = trusted(Decision, **{**DECISION, "nodes": []})
    a.staging.append("x")  # a default factory's value is the model's own
    assert b.staging == [] and a.staging == ["x"] and a.nodes == [] and a.restarts == 0
    with pytest.raises(TypeError, match="decided_at"):
        trusted(Decision, **{k: v for k, v in DECISION.items() if k != "decided_at"})
    with pytest.raises(TypeError, match="colour"):
        trusted(Candidate, node="n1", compute_score=1.0, network_score=1.0, alpha=1.0, composite=1.0, colour=1)


def test_trusted_rows_are_model_construct_of_every_field():
    rows = [("n1", 71.5, 0.0, 1.0, 71.5, None, 32.25), ("n2", 60.0, 10.5, 0.5, 35.25, 3.0, None)]
    got = trusted_rows(Candidate, rows)
    want = [Candidate.model_construct(**dict(zip(Candidate.model_fields, r, strict=True))) for r in rows]
    assert got == want and [type(m) for m in got] == [Candidate, Candidate]
    assert [m.model_fields_set for m in got] == [set(Candidate.model_fields)] * 2
    assert [m.model_dump_json() for m in got] == [m.model_dump_json() for m in want]
    assert trusted_rows(Candidate, []) == []
    with pytest.raises(TypeError, match="a row is not one value per field"):
        trusted_rows(Candidate, [("n1", 1.0, 1.0, 1.0, 1.0)])  # the two optional fields left out


def test_candidates_built_later_are_those_built_at_once():
    """A burst's candidates are built after its placements (decision.Later): until then a decision holds
    an empty list, which its copies share; filled, it is the list built at once."""
    composite = np.array([40.0, -np.inf, 90.0, 90.0, 10.0], np.float32)
    compute, network = np.array([50.0, 1, 2, 3, 4], np.float32), np.array([30.0, 1, 2.123456, 3, 4], np.float32)
    s = dec.Scored(0.5, composite, compute, network)
    reasons = np.array([0, 3, 0, 0, 0], np.int8)
    nodes = SimpleNamespace(ids=["n0", "n1", "n2", "n3", "n4"])
    listed = dec.listing_of(s, nodes, False, reasons, None, 1)
    at_once = dec.candidates(s, nodes, False, listed)
    assert [c.node for c in at_once] == ["n2", "n3", "n0", "n4"] and at_once[0].network_score == 2.1235
    later = dec.Later()
    held = dec.candidates(s, nodes, False, listed, later)
    d = trusted(Decision, **{**DECISION, "candidates": held})
    copy = d.model_copy(update={"restarts": 2})
    assert d.candidates == [] and copy.candidates == []
    later.fill()
    assert d.candidates == at_once and copy.candidates == at_once and copy.restarts == 2
    later.fill()  # filled once: nothing left to build
    assert d.candidates == at_once
