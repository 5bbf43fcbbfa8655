"""Gangs move too: when the path between two members of a data-parallel gang degrades, the gang is
re-placed (only the members that change move), under the same gain, cost and patience rules."""

import time

from core.placement import gang_value
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def scheduler(now):
    nodes = ["n0", "n1", "n2", "n3"]
    paths = {(n, "store"): {"rtt_ms": win(now, 0.5)} for n in nodes}
    # only n0 <-> n1 is close: once it degrades no pair beats another, and the gang keeps n0 (were
    # n2 <-> n3 close too, the whole gang would go there: placement looks for the best whole gang)
    for a, b, p95 in (("n0", "n1", 0.5), ("n2", "n3", 5.0), ("n0", "n2", 5.0), ("n0", "n3", 5.0),
                      ("n1", "n2", 5.0), ("n1", "n3", 5.0)):
        paths[(a, b)] = {"rtt_ms": win(now, p95)}
    return make_scheduler([gpu_node(n, now) for n in nodes], paths)


def test_gang_value_worked_example():
    # first member's composite 80, the others' peer scores 60 and 70: (80 + 60 + 70) / 3
    assert gang_value([80.0, 1.0, 2.0, 3.0], [0.0, 60.0, 70.0, 5.0], [0, 1, 2]) == 70.0


def test_a_gang_moves_off_a_degraded_member_path():
    now = time.time()
    s = scheduler(now)
    task = Task(id="g", type="training-data-parallel", peers=2, resources={"cards": 1}, checkpoint_gb=1,
                expected_duration_s=7200, data_source={"node": "store", "size_gb": 1})
    d = s.decide(task, now)
    assert d.nodes == ["n0", "n1"]  # the followers go where the path to the first is best
    assert s.reschedule(now + 1) == []  # nothing wrong: the gang stays
    # the n0 <-> n1 path degrades: 200 ms p95 and 10 % loss
    rec = s.net.get_key(b"n0|n1")
    s.net.put(b"n0|n1", {**rec, "metrics": {"rtt_ms": win(now + 10, 200.0, lost=10)}})
    s.touch()
    (ev,) = s.reschedule(now + 11)
    assert (ev.task_id, ev.from_nodes, ev.to_nodes, ev.trigger) == ("g", ["n0", "n1"], ["n0", "n2"], "degradation")
    assert ev.after.composite - ev.before.composite >= 10  # the policy's minimum gain in points
    assert ev.expected_gain_s > ev.migration_cost_s * 1.2
    assert s.running["g"].nodes == ["n0", "n2"]
    assert s.reschedule(now + 12) == []  # resting after the move
    # the allocation moved with it: n1 has its card back, n2 holds one
    view = s.nodes(now + 12)
    free = {n: float(view.usable[view.index[n], 0]) for n in ("n1", "n2")}
    assert free["n1"] - free["n2"] == 1.0
