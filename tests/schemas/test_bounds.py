"""Every number of a task, an event and a node command is bounded (issue 28: finite was not enough —
1e300 overflowed the cost report, a timestamp of 4.4e307 made POST /tasks wait), and the OpenAPI
document says so."""

import pytest
from pydantic import ValidationError

from schemas.operations import NodeCommand
from schemas.sched import DURATION_MAX_S, EPOCH_MAX, SIZE_MAX_GB, Task, TaskEvent

BASE = {"id": "t", "type": "inference"}


@pytest.mark.parametrize(("extra", "field"), [
    ({"expected_duration_s": 1e300}, "expected_duration_s"),
    ({"submitted_at": 4.4e307}, "submitted_at"),
    ({"deferrable_until": EPOCH_MAX + 1}, "deferrable_until"),
    ({"checkpoint_gb": 1e300}, "checkpoint_gb"),
    ({"data_source": {"node": "s", "size_gb": 1e300}}, "data_source.size_gb"),
    ({"image": {"node": "s", "size_gb": SIZE_MAX_GB * 2}}, "image.size_gb"),
])
def test_a_task_with_a_number_out_of_range_names_the_field(extra, field):
    with pytest.raises(ValidationError) as exc:
        Task.model_validate({**BASE, **extra})
    assert [".".join(map(str, e["loc"])) for e in exc.value.errors()] == [field]


def test_the_bounds_admit_any_real_job():
    Task.model_validate({**BASE, "expected_duration_s": 90 * 86_400, "submitted_at": 1_764_601_445.0,
                         "data_source": {"node": "s", "size_gb": 2_000_000.0}})
    assert DURATION_MAX_S >= 10 * 365 * 86_400 and SIZE_MAX_GB >= 1e6


def test_events_and_node_commands_are_bounded_and_a_priority_event_carries_one():
    for bad in ({"at": 4.4e307}, {"at": 1e9, "duration_s": 1e300}, {"at": 1e9, "checkpoint_gb": 1e300}):
        with pytest.raises(ValidationError):
            TaskEvent.model_validate({"task_id": "t", "event": "checkpoint", **bad})
    with pytest.raises(ValidationError, match="carries the new priority"):
        TaskEvent.model_validate({"task_id": "t", "event": "priority", "at": 1e9})
    assert TaskEvent.model_validate({"task_id": "t", "event": "priority", "at": 1e9, "priority": 90}).priority == 90
    with pytest.raises(ValidationError):
        NodeCommand.model_validate({"node": "n1", "action": "drain", "at": 1e9, "deadline_s": 1e300})


def test_the_openapi_document_states_the_bounds():
    from streams.web.openapi import document

    schemas = document()["components"]["schemas"]
    assert schemas["Task"]["properties"]["expected_duration_s"]["maximum"] == DURATION_MAX_S
    assert schemas["Endpoint"]["properties"]["size_gb"]["maximum"] == SIZE_MAX_GB
