"""Issue 18: compute scores in standard units across classes when a task may run on several classes;
within the class when it accepts one (the only comparison there is); a policy field overrides."""

import time

import pytest

from schemas.sched import Task
from streams.adapters.inventory import SCORE_COLUMN, cluster_key
from streams.adapters.tasks import compute_column
from tests.helpers.scheduling import gpu_node, make_scheduler


def task(tid, classes=(), typ="training-data-parallel"):
    return Task(id=tid, type=typ, resources={"cards": 1, "accel_classes": list(classes)})


def test_the_column_a_task_is_scored_by():
    within, across = SCORE_COLUMN["training"], SCORE_COLUMN[cluster_key("training")]
    assert within != across
    assert compute_column(task("a"), "training") == across  # any class: across classes
    assert compute_column(task("b", ["h100", "l40s"]), "training") == across  # several: across
    assert compute_column(task("c", ["h100"]), "training") == within  # one class: within it
    assert compute_column(task("d"), "training", "class") == within
    assert compute_column(task("e", ["h100"]), "training", "cluster") == across


@pytest.mark.parametrize("scope,expected", [("auto", {"big"}), ("cluster", {"big"}), ("class", {"big", "small"})])
def test_a_task_open_to_every_class_goes_to_the_stronger_card(scope, expected):
    """"big" (fp16 1000/card, class h100) and "small" (400/card, class l40s), alone in their classes
    and alike otherwise. Within classes both score 100 and the decision is a tie. In standard units:
    compute 100 and 40; storage 50 each (memory 80 GB: 0.5 x 100, no bandwidths reported), interconnect
    50 each (inter 400 only), quality 85 each; training weighs them 0.5/0.15/0.25/0.1: raw 78.5 and
    48.5, so big 100 and small 48.5 / 78.5 x 100 = 61.78."""
    now = time.time()
    s = make_scheduler([gpu_node("big", now, 1000.0, accel_class="h100"),
                        gpu_node("small", now, 400.0, accel_class="l40s")], {})
    s.compute_scope = scope
    d = s.decide(task("t"), now)
    scores = {c.node: c.compute_score for c in d.candidates}
    assert d.nodes[0] in expected
    if scope == "class":
        assert scores == {"big": pytest.approx(100.0), "small": pytest.approx(100.0)}
    else:
        assert scores["big"] == pytest.approx(100.0) and scores["small"] == pytest.approx(4850 / 78.5, abs=0.01)
    # pinned to one class, auto compares within it: l40s only, its node is the best there
    d = s.decide(task("p", ["l40s"]), now)
    assert d.nodes == ["small"] and d.candidates[0].compute_score == pytest.approx(
        100.0 if scope != "cluster" else 4850 / 78.5, abs=0.01)


def test_frugal_types_are_kept_off_high_end_cards_when_configured():
    """CNSCHED_FRUGAL_TYPES (off by default: on the Philly replay it cost those jobs 49 % in mean JCT,
    every job running faster on newer cards): a fine-tune then takes the weaker card, big 40 % of its
    score (capability 8 x 400 x 0.4 = 1280 against 8 x 1000 x 0.4 = 3200), small 100."""
    import dataclasses

    from streams.config import Settings
    from streams.worker.scheduling.wiring import make_scheduler as from_settings

    now = time.time()
    s = make_scheduler([gpu_node("big", now, 1000.0, accel_class="h100"),
                        gpu_node("small", now, 400.0, accel_class="l40s")], {})
    assert s.decide(task("f0", typ="fine-tune"), now).nodes == ["big"]  # by default: the stronger card
    s.types = {t: dataclasses.replace(d, frugal=t == "fine-tune") for t, d in s.types.items()}
    d = s.decide(task("f1", typ="fine-tune"), now)
    scores = {c.node: c.compute_score for c in d.candidates}
    assert d.nodes == ["small"] and scores == {"big": pytest.approx(40.0), "small": pytest.approx(100.0)}
    # the setting reaches the scheduler's types; an unknown type is refused
    sched = from_settings(Settings(frugal_types=["fine-tune", "preprocessing"]), s.net, s.inv)
    assert {t for t, x in sched.types.items() if x.frugal} == {"fine-tune", "preprocessing"}
    with pytest.raises(ValueError, match="'gaming' is not a task type"):
        Settings(frugal_types=["gaming"])
