"""/openapi.json describes every route and method, and its schemas say what the models say."""

import json

import pytest
from faust.web import View
from jsonschema import Draft202012Validator

from streams.web.openapi import OPERATIONS, document
from streams.web.routes import ROUTES
from tests.helpers.openapi import check_answer, template_of

METHODS = ("get", "post", "put", "patch", "delete")


def implemented() -> set[tuple[str, str]]:
    return {(path, m) for path, view in ROUTES for m in METHODS if getattr(view, m) is not getattr(View, m)}


def test_every_route_and_method_is_described_and_nothing_else():
    described = {(op.path, op.method) for op in OPERATIONS}
    assert implemented() == described
    doc = document()
    assert doc["openapi"] == "3.1.0"
    assert {(p, m) for p, ms in doc["paths"].items() for m in ms} == described
    json.dumps(doc)  # plain JSON
    for path, ms in doc["paths"].items():
        for m, op in ms.items():
            names = {x["name"] for x in op["parameters"] if x["in"] == "path"}
            assert names == set(part[1:-1] for part in path.split("/") if part.startswith("{")), (path, m)


def test_operation_ids_are_unique_identifiers_a_client_generator_can_use():
    ids = [op["operationId"] for ms in document()["paths"].values() for op in ms.values()]
    assert len(ids) == len(set(ids)) and all(i.isidentifier() and i[0].islower() for i in ids), ids
    assert document()["paths"]["/tasks/{task_id}"]["get"]["operationId"] == "getTask"


def test_every_reference_resolves():
    doc = document()
    text = json.dumps(doc)
    for ref in set(part.split('"')[0] for part in text.split('"$ref": "')[1:]):
        name = ref.removeprefix("#/components/schemas/")
        assert name in doc["components"]["schemas"], ref


def validator(name: str) -> Draft202012Validator:
    doc = document()
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": doc["components"]})


def test_the_task_schema_takes_a_task_and_refuses_a_bad_one():
    v = validator("Task")
    v.validate({"id": "t1", "type": "inference", "resources": {"cards": 1}})
    assert not v.is_valid({"id": "t1", "type": "inference", "resources": {"cards": -1}})
    assert not v.is_valid({"type": "inference"})  # no id


def test_answers_are_matched_to_their_path_and_checked():
    assert template_of("/network/nodes") == "/network/nodes"
    assert template_of("/network/nodes/n1?x=1") == "/network/nodes/{node}"
    assert template_of("/nowhere") is None
    check_answer("GET", "/health", 200, {"status": "ok", "app": "cnsched"})
    check_answer("GET", "/network/nodes/n1", 404, {"error": "unknown node", "node": "n1"})
    with pytest.raises(AssertionError, match="status 418"):
        check_answer("GET", "/health", 418, {})
    with pytest.raises(AssertionError, match="status"):
        check_answer("GET", "/health", 200, {"status": "fine", "app": "x"})  # not ok / not_ready
    with pytest.raises(AssertionError, match="total"):
        check_answer("GET", "/network/nodes", 200, {"items": [], "offset": 0, "limit": 10})
