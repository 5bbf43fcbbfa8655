"""API bodies as models: the JSON on the wire keeps its names (`class`, `from`), leaves unset optional
fields out, and error bodies carry their extra keys."""

from schemas.api import (
    ComputeAnswer,
    ErrorBody,
    FieldError,
    ForecastAnswer,
    Health,
    Page,
    TaskAnswer,
)


def test_aliases_and_unset_fields():
    f = ForecastAnswer(node="n1", metric="bw_util", stat="mean", step_s=60, horizon_s=120, history_steps=2880,
                       start=1.0, points=[{"t": 61.0, "value": 0.5}])
    assert f.body() == {"node": "n1", "metric": "bw_util", "stat": "mean", "step_s": 60, "horizon_s": 120,
                        "history_steps": 2880, "from": 1.0, "points": [{"t": 61.0, "value": 0.5}]}
    c = ComputeAnswer(**{"node": "n1", "class": "gpu", "available": True, "compute_score": {"training": 1.0},
                         "dimensions": {}, "report": {"x": 1}, "last_seen": 5.0, "age_s": 0.5})
    assert c.body()["class"] == "gpu" and "node_class" not in c.body()


def test_error_bodies_and_pages():
    e = ErrorBody(error="invalid request", fields=[FieldError(field="limit", value="0", reason="must be in [1, 9]")])
    assert e.body() == {"error": "invalid request", "fields": [{"field": "limit", "value": "0", "reason": "must be in [1, 9]"}]}
    assert ErrorBody(error="unknown node", node="zz").body() == {"error": "unknown node", "node": "zz"}
    # a field error without a value (the body was not JSON) has no value key
    assert ErrorBody(error="invalid task", fields=[FieldError(field="body", reason="not JSON")]).body()["fields"] == [
        {"field": "body", "reason": "not JSON"}]
    assert Page(items=[{"a": 1}], total=3, offset=0, limit=1).body() == {"items": [{"a": 1}], "total": 3, "offset": 0,
                                                                           "limit": 1}
    assert Health(status="ok", app="cnsched").body() == {"status": "ok", "app": "cnsched"}
    # a decision that is still None is said so (200 answers always carry the key)
    assert TaskAnswer(task_id="t", status="queued", nodes=[], decision=None).body() == {
        "task_id": "t", "status": "queued", "nodes": [], "decision": None}
