"""Task records: what a restarted scheduler needs, and a history that keeps the newest 50 entries."""

import math

from schemas.api import ServiceState, TaskRecord
from schemas.sched import Task
from streams.worker.scheduling.state import Running
from streams.worker.taskbook import HISTORY_KEPT, running_state, updated


def test_running_state_keeps_what_a_restart_needs_and_nan_as_null():
    task = Task(id="t1", type="inference")
    run = Running(task, ["n1"], 0.8, "latency", 100.0, math.nan, cooldown_until=700.0, moves=2, ran_s=40.0,
                  start_at=130.0)
    state = running_state(run)
    assert state.body() == {"alpha": 0.8, "profile": "latency", "placed_at": 100.0, "baseline_p95": None,
                            "cooldown_until": 700.0, "moves": 2, "baseline_loss": None, "seen_window_end": None,
                            "checkpoint_at": None, "checkpoint_gb": None, "restarts": 0, "started": False,
                            "ran_s": 40.0, "start_at": 130.0}
    assert run.ran_for(160.0) == 100.0  # 40 s before its last move, 60 s since
    assert running_state(None) is None
    run.started = True  # a restarted worker must not time out a task that runs
    assert running_state(run).started is True


def test_updated_creates_then_appends_and_trims_the_history():
    task = Task(id="t1", type="inference")
    rec = updated(None, task, "queued", [], {"decision": {"status": "unschedulable"}}, None)
    assert rec.task["id"] == "t1" and rec.status == "queued" and len(rec.history) == 1
    for i in range(HISTORY_KEPT + 5):
        rec = updated(rec, None, "placed", ["n1"], {"event": {"i": i}}, None)
    assert len(rec.history) == HISTORY_KEPT and rec.history[-1] == {"event": {"i": HISTORY_KEPT + 4}}
    # the table's JSON round-trips, every field present
    back = TaskRecord.model_validate_json(rec.model_dump_json())
    assert back == rec and set(rec.body()) == {"task", "status", "nodes", "running", "service", "history"}


def test_a_services_state_is_kept_until_a_new_one_comes():
    task = Task(id="svc", type="inference", scaling={"min_replicas": 1})
    rec = updated(None, task, "placed", ["n1"], None, None, ServiceState(replicas=["svc.r0"], next_index=1))
    assert rec.history == []  # no entry: none added
    rec = updated(rec, None, "placed", ["n1"], {"event": {"event": "started"}}, None)
    assert rec.service.replicas == ["svc.r0"] and len(rec.history) == 1
    rec = updated(rec, None, "placed", ["n1", "n2"], None, None, ServiceState(replicas=["svc.r0", "svc.r1"]))
    assert rec.service.replicas == ["svc.r0", "svc.r1"] and len(rec.history) == 1


def test_all_parses_a_record_once_until_it_changes():
    from streams.worker.taskbook import TaskBook

    table = {}
    book = TaskBook(table)
    for k in range(3):
        rec = updated(None, Task(id=f"t{k}", type="inference"), "queued", [], {"decision": {"k": k}}, None)
        table[f"t{k}".encode()] = rec.model_dump_json(by_alias=True).encode()
    first = {r.task["id"]: r for r in book.all()}
    again = {r.task["id"]: r for r in book.all()}
    assert all(again[t] is first[t] for t in first)  # unchanged: the same parsed record
    table[b"t1"] = updated(first["t1"], None, "placed", ["n1"], {"event": {}}, None).model_dump_json().encode()
    del table[b"t2"]
    now = {r.task["id"]: r for r in book.all()}
    assert set(now) == {"t0", "t1"} and now["t0"] is first["t0"] and now["t1"].status == "placed"
    assert set(book._parsed) == {b"t0", b"t1"}  # a removed record is forgotten
