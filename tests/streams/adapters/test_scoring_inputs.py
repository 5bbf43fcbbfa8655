"""scoring_inputs remembers each task's own part of its row (_row: endpoints, class mask, need, compute
column, penalty) per task object, type defaults, scope and class list; what it builds must be what
the plain per-task composition builds, before and after the memo is warm, and again when any of
those change."""

import dataclasses
import gc
import weakref

import numpy as np

from core.scoring import class_mask
from core.sensitivity import accel_penalty
from core.vocabulary import DEFAULT_TYPES
from streams.adapters.tasks import compute_column, endpoints, endpoints_of, need, scoring_inputs
from streams.dev.bench.decide import _tasks, _world


def _reference(tasks, nodes, eps, types, scope):
    """The composition task by task, as scoring_inputs did it before the memo."""
    eindex = {x: i for i, x in enumerate(eps)}
    ep_idx, data_ep, data_gb, masks = [], [], [], []
    for t in tasks:
        es = endpoints_of(t)
        ep_idx += [eindex[e.node] for e in es]
        big = max(es, key=lambda e: e.size_gb, default=None)
        data_ep.append(eindex[big.node] if big is not None else -1)
        data_gb.append(sum(e.size_gb for e in es))
        allowed = [nodes.class_names.index(c) for c in t.resources.accel_classes if c in nodes.class_names]
        masks.append(class_mask(allowed, bool(t.resources.accel_classes)))
    return {"ep_idx": np.array(ep_idx, np.int64), "data_ep": np.array(data_ep, np.int64),
            "data_gb": np.array(data_gb, np.float32), "class_mask": np.array(masks, np.int64),
            "need": np.array([need(t) for t in tasks], np.float32).reshape(-1, 3),
            "kind": np.array([compute_column(t, types[t.type].kind, scope, types[t.type].frugal) for t in tasks]),
            "accel_penalty": np.array([accel_penalty(types[t.type], t.resources.cards) for t in tasks], np.float32)}


def test_the_remembered_rows_are_the_plain_composition_and_follow_what_they_depend_on():
    sched, now, _ = _world(16, 4)
    nodes = sched.nodes(now)
    tasks = _tasks(40, 4, "s")
    tasks = [t.model_copy(update={"resources": t.resources.model_copy(update={"accel_classes": ["gpu"]})})
             if i % 2 else t for i, t in enumerate(tasks)]  # half name the class they accept
    assert any(endpoints_of(t) for t in tasks) and any(not endpoints_of(t) for t in tasks)
    eps = endpoints(tasks)
    net = sched.network(eps, nodes, "balanced")
    frugal = {k: dataclasses.replace(d, frugal=True, prefers_plain_nodes=True) for k, d in DEFAULT_TYPES.items()}
    cases = [(DEFAULT_TYPES, "auto"), (DEFAULT_TYPES, "auto"), (DEFAULT_TYPES, "cluster"), (frugal, "cluster")]
    kinds = []
    for types, scope in cases:  # the second is served from the memo; the last two change scope, then types
        x = scoring_inputs(tasks, [0.5] * len(tasks), nodes, eps, net, types, scope=scope)
        want = _reference(tasks, nodes, eps, types, scope)
        for field, v in want.items():
            np.testing.assert_array_equal(getattr(x, field), v, err_msg=f"{field} ({scope})")
        kinds.append(x.kind.tolist())
    assert kinds[0] == kinds[1] and kinds[2] != kinds[3]  # frugal types are scored by another column
    # a new class list (a node of a new class joined) gives new masks for tasks that name classes
    renamed = dataclasses.replace(nodes, class_names=["other", *nodes.class_names])
    before = scoring_inputs(tasks, [0.5] * len(tasks), nodes, eps, net, DEFAULT_TYPES).class_mask
    x = scoring_inputs(tasks, [0.5] * len(tasks), renamed, eps, net, DEFAULT_TYPES)
    assert (x.class_mask != before).any()
    np.testing.assert_array_equal(x.class_mask, _reference(tasks, renamed, eps, DEFAULT_TYPES, "auto")["class_mask"])


def test_a_remembered_task_list_follows_types_changed_in_place_order_and_alphas():
    """The job side is remembered per task list: a type's defaults replaced in the same dict (not a
    new dict), the same tasks in another order, and new alphas each give what the plain composition
    gives, never the remembered arrays."""
    sched, now, _ = _world(16, 4)
    nodes = sched.nodes(now)
    tasks = _tasks(12, 4, "g")
    eps = endpoints(tasks)
    net = sched.network(eps, nodes, "balanced")
    types = dict(DEFAULT_TYPES)
    first = scoring_inputs(tasks, [0.5] * len(tasks), nodes, eps, net, types, scope="cluster")
    for k, d in list(types.items()):  # in place: the same dict, every type now frugal
        types[k] = dataclasses.replace(d, frugal=True)
    x = scoring_inputs(tasks, [0.5] * len(tasks), nodes, eps, net, types, scope="cluster")
    assert x.kind.tolist() != first.kind.tolist()
    np.testing.assert_array_equal(x.kind, _reference(tasks, nodes, eps, types, "cluster")["kind"])
    back = tasks[::-1]
    y = scoring_inputs(back, [0.25] * len(back), nodes, eps, net, types, scope="cluster")
    for field, v in _reference(back, nodes, eps, types, "cluster").items():
        np.testing.assert_array_equal(getattr(y, field), v, err_msg=field)
    assert (y.alpha == 0.25).all() and (x.alpha == 0.5).all()


def test_a_remembered_row_goes_with_its_task():
    """A long-running worker sees tasks by the hundred thousand: the memo must not keep finished ones
    alive (before, up to 65,536 of them were)."""
    from streams.adapters.tasks import _ROWS, _row

    t = _tasks(1, 4, "gone")[0]
    d = DEFAULT_TYPES[t.type]
    row = _row(t, d, "auto", ["gpu"])
    key = id(t)
    assert _ROWS[key][0]() is t and _row(t, d, "auto", ["gpu"]) is row  # remembered
    del t
    gc.collect()
    assert key not in _ROWS


def test_a_task_lists_endpoints_are_remembered_per_task_objects():
    tasks = _tasks(12, 3, "ep")

    def plain(ts):
        return sorted({e.node for t in ts for e in endpoints_of(t)})

    first = endpoints(tasks)
    assert first == plain(tasks) and first  # some tasks load data
    first.append("mutated by a caller")  # a caller's copy: the memo is not touched
    assert endpoints(tasks) == plain(tasks)
    moved = [t.model_copy(update={"data_source": t.data_source.model_copy(update={"node": "elsewhere"})}) if i == 1 else t
             for i, t in enumerate(tasks)]  # a new task object for one of them: a new list
    assert endpoints(moved) == plain(moved) and "elsewhere" in endpoints(moved)
    assert endpoints(tasks[:3]) == plain(tasks[:3])


def test_a_remembered_task_list_goes_when_one_of_its_tasks_does():
    """endpoints and scoring_inputs remember per list of task objects (adapters.tasks.ByTaskList): the
    memo holds the tasks weakly, so a finished task is not kept alive, and an entry whose task is gone
    is dropped (its id may be another task's next)."""
    from streams.adapters.tasks import ByTaskList

    memo = ByTaskList()
    tasks = _tasks(3, 4, "weak")
    calls = []
    assert memo.get(tasks, "x", lambda: calls.append(1) or "made") == "made"
    assert memo.get(tasks, "x", lambda: calls.append(1) or "again") == "made" and len(calls) == 1  # remembered
    assert memo.get(tasks, "y", lambda: "other") == "other" and len(memo) == 2  # another extra: another entry
    alive = weakref.ref(tasks[1])
    del tasks[1]
    gc.collect()
    assert alive() is None  # not kept alive by the memo
    assert len(memo) == 0  # both entries held it
    assert memo.get(tasks, "x", lambda: "fresh") == "fresh"
