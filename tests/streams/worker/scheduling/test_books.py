"""The books against a plain dict under random operations: after every step their entries are the
dict's, in the dict's order; the pending book's ``ready`` gives the rows of those not held, each
row's arrays as its entry stands (a replaced task object, a hold or a release made on the entry itself
included; many removals compact the rows); the running book's ``placements`` are the per-task
composition they replaced (moves, new task objects, time run, a node view's index changing)."""

import math

import numpy as np
import pytest

from schemas.sched import Task
from streams.worker.scheduling.books import PendingBook, RunningBook
from streams.worker.scheduling.held import Pending, Running

NOW = 1_000_000.0


def entry(rng, i: int) -> Pending:
    t = Task(id=f"t{i}", type="inference", resources={"cards": int(rng.integers(1, 9))}, peers=int(rng.integers(1, 3)),
             priority=int(rng.integers(0, 4)) * 25, expected_duration_s=float(rng.choice([60, 600, 3600])),
             deferrable_until=None if rng.random() < 0.5 else NOW + float(rng.uniform(0, 9000)))
    return Pending(t, NOW - float(rng.uniform(0, 2000)))


def agree(book: PendingBook, ref: dict) -> None:
    assert list(book.items()) == list(ref.items())
    rows = book.ready()
    want = [p for p in ref.values() if not p.held]
    assert [p for p in book.entries[rows]] == want and all(a is b for a, b in zip(book.entries[rows], want, strict=True))
    for row, p in zip(rows.tolist(), want, strict=True):
        t = p.task
        deadline = math.nan if t.deferrable_until is None else t.deferrable_until
        np.testing.assert_array_equal(book.order[row], [t.priority, t.expected_duration_s, deadline])
        assert book.submitted[row] == p.submitted_at
        code = int(book.code[row])
        assert book.shape_need[code].tolist() == [float(t.resources.cards), 0.0, 0.0]
        assert book.shape_peers[code] == t.peers


@pytest.mark.parametrize("seed", range(6))
def test_the_book_is_the_dict_it_stands_for(seed):
    rng = np.random.default_rng(seed)
    book, ref, made = PendingBook(), {}, 0
    for _ in range(600):
        op = rng.integers(0, 8)
        keys = list(ref)
        if op <= 2 or not keys:  # a new entry (the dict puts it last)
            p = entry(rng, made)
            made += 1
            book[p.task.id] = ref[p.task.id] = p
        elif op == 3:  # an entry set again: its place kept, its facts read again
            k = keys[rng.integers(len(keys))]
            p = entry(rng, int(k[1:]))
            book[k] = ref[k] = p
        elif op == 4:
            k = keys[rng.integers(len(keys))]
            assert book.pop(k) is ref.pop(k)
        elif op == 5:
            k = keys[rng.integers(len(keys))]
            del book[k], ref[k]
        elif op == 6:  # changed in place: held or released, or a new priority (a new task object)
            p = ref[keys[rng.integers(len(keys))]]
            if rng.random() < 0.5:
                p.held = not p.held
            else:
                p.task = p.task.model_copy(update={"priority": int(rng.integers(0, 100))})
        else:
            k = keys[rng.integers(len(keys))]
            assert book.setdefault(k, entry(rng, 9999)) is ref[k]
        agree(book, ref)
    assert book.pop("absent", None) is None
    with pytest.raises(KeyError):
        book.pop("absent")
    book.clear()
    agree(book, {})


def test_removals_compact_the_rows_and_keep_the_order():
    rng = np.random.default_rng(7)
    book = PendingBook({f"t{i}": entry(rng, i) for i in range(300)})
    for i in range(0, 300, 3):
        del book[f"t{i}"]
    for i in range(1, 300, 3):
        book.pop(f"t{i}")
    rows = book.ready()  # 100 left of 300 rows: compacted first
    assert book._used == 100 and rows.tolist() == list(range(100))
    assert [p.task.id for p in book.entries[rows]] == [f"t{i}" for i in range(2, 300, 3)]
    p = entry(rng, 1000)
    book["new"] = p
    assert book.entries[book.ready()[-1]] is p


def reference(running: dict, index: dict) -> tuple:
    """The per-task composition: each running task's node rows in ``index``, its time run, since
    when, its expected duration and need, for the tasks with a node there."""
    runs = list(running.values())
    rows = [[index[x] for x in r.nodes if x in index] for r in runs]
    here = [k for k, x in enumerate(rows) if x]
    return (np.array([i for x in rows for i in x], np.int64), np.array([len(rows[k]) for k in here], np.int64),
            np.array([runs[k].ran_s for k in here]), np.array([runs[k].placed_at for k in here]),
            np.array([runs[k].task.expected_duration_s for k in here]),
            np.array([[float(runs[k].task.resources.cards), 0.0, 0.0] for k in here for _ in rows[k]]).reshape(-1, 3))


@pytest.mark.parametrize("seed", range(6))
def test_the_running_books_placements_are_the_per_task_ones(seed):
    rng = np.random.default_rng(seed)
    names = [f"n{i}" for i in range(12)]
    index = {x: k for k, x in enumerate(names[:10])}  # n10 and n11 are not in the view
    book, ref, made = RunningBook(), {}, 0
    for step in range(400):
        op = rng.integers(0, 7)
        keys = list(ref)
        if op <= 2 or not keys:
            t = entry(rng, made).task
            made += 1
            nodes = list(rng.choice(names, int(rng.integers(1, 5)), replace=False))
            book[t.id] = ref[t.id] = Running(t, nodes, 1.0, "bandwidth", NOW + step, float("nan"))
        elif op == 3:
            k = keys[rng.integers(len(keys))]
            del book[k], ref[k]
        elif op == 4:  # a move (a new node list) or a rollback to the list it had
            r = ref[keys[rng.integers(len(keys))]]
            r.nodes = list(rng.choice(names, len(r.nodes), replace=False))
            r.ran_s, r.placed_at = r.ran_s + 5.0, NOW + step
        elif op == 5:
            r = ref[keys[rng.integers(len(keys))]]
            r.task = Task(**(r.task.model_dump() | {"expected_duration_s": float(rng.integers(1, 9000)),
                                                    "resources": {"cards": int(rng.integers(1, 9))}}))
        else:  # a new node view: another index object (rows read again)
            index = dict(index)
        want, got = reference(ref, index), book.placements(index)
        assert list(book) == list(ref)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_an_entry_tells_only_the_books_it_is_in():
    """An entry set in two books tells both when it changes in place; once removed from one (or
    replaced there by another object) it tells that one nothing more, and a copy of it tells none."""
    import copy

    rng = np.random.default_rng(3)
    a, b = PendingBook(), PendingBook()
    p = entry(rng, 1)
    p.held = False
    a["t1"] = b["t1"] = p
    p.held = True
    assert a.ready().size == 0 and b.ready().size == 0  # both told
    del a["t1"]
    a["t1"] = other = entry(rng, 2)
    other.held = False
    p.held = False
    assert a.ready().size == 1 and a.entries[a.ready()[0]] is other  # a no longer hears from p
    assert b.ready().size == 1 and b.entries[b.ready()[0]] is p
    twin = copy.copy(p)
    twin.held = True  # a copy is in no book: b is not changed by it
    assert b.ready().size == 1 and p._books == (b,)
