"""HTTP bodies are read with exactly the JSON types /openapi.json names (issue 32, finding 6:
schemathesis found "0" taken for a boolean and "1" for a number)."""

import pytest
from pydantic import ValidationError

from schemas.api import TaskPriorityCommand, field_errors, read_body
from schemas.sched import Task


def test_integral_numbers_are_integers_and_strings_or_numbers_are_not_coerced():
    assert read_body(TaskPriorityCommand, b'{"priority": 4.0}').priority == 4
    t = read_body(Task, b'{"id": "t", "type": "inference", "resources": {"cards": 2.0}, "expected_duration_s": 5}')
    assert (t.resources.cards, t.expected_duration_s) == (2, 5.0)
    for raw, field in ((b'{"priority": "4"}', "priority"), (b'{"priority": 4.5}', "priority"),
                       (b'{"priority": true}', "priority")):
        with pytest.raises(ValidationError) as exc:
            read_body(TaskPriorityCommand, raw)
        assert [e["field"] for e in field_errors(exc.value)] == [field]
    with pytest.raises(ValidationError) as exc:
        read_body(Task, b'{"id": "t", "type": "inference", "constraints": {"spread": 0}}')
    assert [e["field"] for e in field_errors(exc.value)] == ["constraints.spread"]


@pytest.mark.parametrize("raw", [b"{nope", b'{"priority": NaN}', b"[" * 100_000 + b"]" * 100_000])
def test_what_is_not_json_is_json_invalid(raw):
    with pytest.raises(ValidationError) as exc:
        read_body(TaskPriorityCommand, raw)
    assert any(e["type"] == "json_invalid" for e in exc.value.errors())


def test_a_required_body_must_be_there_and_an_optional_one_may_be_absent():
    with pytest.raises(ValidationError) as exc:
        read_body(Task, b"")
    assert [e["field"] for e in field_errors(exc.value)] == ["body"]
    from schemas.api import TaskCommand

    assert read_body(TaskCommand, b"", required=False).by is None
