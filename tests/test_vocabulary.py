"""The words core defines once and schemas spells as pydantic literals are the same words."""

import typing

from core import vocabulary as V
from schemas import sched


def literal(annotation) -> tuple:
    """The values of a Literal (or an optional Literal)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return args
    return tuple(v for a in args for v in literal(a))


def field(model, name):
    return literal(model.model_fields[name].annotation)


def test_task_types_are_the_core_defaults():
    assert field(sched.Task, "type") == V.TASK_TYPES == tuple(V.DEFAULT_TYPES)


def test_network_profiles_strategies_and_triggers():
    assert field(sched.Task, "network_profile") == V.NETWORK_PROFILES
    assert field(sched.Task, "strategy") == V.STRATEGIES == tuple(V.STRATEGY_ALPHA)
    assert field(sched.RescheduleEvent, "trigger") == V.RESCHEDULE_TRIGGERS


def test_type_defaults_use_known_profiles_and_kinds():
    for d in V.DEFAULT_TYPES.values():
        assert d.profile in V.NETWORK_PROFILES and d.kind in V.TASK_KINDS and 0 <= d.alpha <= 1


def test_one_id_pattern():
    from schemas.compute import NODE_ID_PATTERN

    assert sched.ID_PATTERN == NODE_ID_PATTERN
