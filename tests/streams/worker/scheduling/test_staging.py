"""Data that follows compute (streams/worker/scheduling/staging.py, issue 53's E2): a task placed away
from its named data stages a copy at its site's store, the decision says so, and later tasks naming
the same data load from the copy; numbers by hand."""

from __future__ import annotations

import math

import pytest

from core.ect import TRAINING_COMM_SHARE, run_seconds
from schemas.sched import Task
from streams.worker.scheduling.staging import CopyBook, load_name
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0
E1 = "rack:east/e1"


def gbps(end: float, value: float) -> dict:
    return {"window_start": end - 10, "window_end": end, "count": 5, "kept": 5, "outliers": 0, "lost": 0,
            "mean": value, "p50": value, "p95": value, "p99": value, "min": value, "max": value}


def east_only(store: str = "store.{site}", measured: bool = True):
    """Four nodes in rack e1 at site east; the data's origin store.west 20 ms away measures 2 Gbit/s to
    e1, east's own store 40 Gbit/s (read as 10: a store reports no link, core.quality.DEFAULT_LINK_GBPS)."""
    nodes = [gpu_node(f"n{i}", NOW, rack="e1", region="east") for i in range(4)]
    paths = {(E1, E1): {"rtt_ms": win(NOW, 0.05)},
             ("store.west", E1): {"rtt_ms": win(NOW, 20.0), "bw_gbps": gbps(NOW, 2.0)},
             ("store.east", E1): {"rtt_ms": win(NOW, 0.2), "bw_gbps": gbps(NOW, 40.0)}}
    if not measured:
        del paths[("store.east", E1)]
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = math.inf, None
    s.copies = CopyBook(store=store)
    return s


def reader(tid: str, name: str | None = "imagenet", peers: int = 1) -> Task:
    return Task(id=tid, type="training-data-parallel", peers=peers, resources={"cards": 8}, submitted_at=NOW,
                expected_duration_s=3600.0, data_source={"node": "store.west", "size_gb": 500, "name": name})


def test_a_task_placed_away_from_its_data_stages_it_and_the_next_one_loads_the_copy():
    s = east_only()
    d = s.decide(reader("t1"), NOW)
    # 500 GB over 2 Gbit/s: 2,000 s, then 3,600 s of run
    assert d.status == "placed" and d.expected_completion_s == pytest.approx(5600.0, abs=1)
    assert [x.model_dump() for x in d.staging] == [{"name": "imagenet", "source": "store.west",
                                                    "target": "store.east", "size_gb": 500.0,
                                                    "expected_s": pytest.approx(2000.0)}]
    assert s.copies.holding("imagenet") == [("store.east", pytest.approx(NOW + 2000))]
    assert d.data_at is None  # it reads from the origin as its copy arrives: its staging says where
    # once the copy is there: 500 GB over 10 Gbit/s = 400 s from store.east, not 2,000 s
    d2 = s.decide(reader("t2"), NOW + 2100)
    assert d2.expected_completion_s == pytest.approx(4000.0, abs=1) and d2.staging == []
    # it copies nothing, and its runner is told where the copy it was costed to read is
    assert d2.data_at.model_dump() == {"name": "imagenet", "store": "store.east"}
    assert [(e[0], e[1]) for e in s.path_book.entries if e[0] == "t2"] == [("t2", "store.east")]
    # 1,800 s after the first: the copy is 200 s from done; 200 + 400 = 600 s beats 2,000 s from the origin
    s.end("t1"), s.end("t2")
    d3 = s.decide(reader("t3"), NOW + 1800)
    assert d3.expected_completion_s == pytest.approx(4200.0, abs=1) and d3.data_at.store == "store.east"
    # 100 s after it: 1,900 + 400 = 2,300 s; from the origin 2,000 s
    s.end("t3")
    d4 = s.decide(reader("t4"), NOW + 100)
    assert d4.expected_completion_s == pytest.approx(5600.0, abs=1) and d4.data_at is None  # the origin


def test_other_data_unnamed_data_and_staging_off_stage_nothing():
    s = east_only()
    s.decide(reader("t1"), NOW)
    d = s.decide(reader("t2", name="coco"), NOW + 2100)  # another data set: its own copy, from the origin
    assert d.expected_completion_s == pytest.approx(5600.0, abs=1) and [x.name for x in d.staging] == ["coco"]
    s.end("t2")  # its load booked the origin's path
    d = s.decide(reader("t3", name=None), NOW + 2100)  # unnamed: never staged, never found
    assert d.staging == [] and d.expected_completion_s == pytest.approx(5600.0, abs=1)
    unseen = east_only(measured=False)  # no probe measures east's store: a copy there would never be read
    assert unseen.decide(reader("t1"), NOW).staging == [] and unseen.copies.at == {}
    off = east_only(store="")
    d = off.decide(reader("t1"), NOW)
    assert d.staging == [] and off.copies.at == {}
    assert off.decide(reader("t2"), NOW + 2100).expected_completion_s == pytest.approx(5600.0, abs=1)


def test_a_store_keeps_its_capacity_least_recently_used_out():
    book = CopyBook(capacity_gb=1000.0)
    book.stage("a", "d1", "o", "store.x", 400, 10, now=0.0)
    book.stage("b", "d2", "o", "store.x", 400, 10, now=1.0)
    book.used("d1", "store.x", 2.0)  # d1 read since: d2 is the least recently used
    book.stage("c", "d3", "o", "store.x", 400, 10, now=3.0)
    assert sorted(book.at["store.x"]) == ["d1", "d3"]
    book.stage("d", "d4", "o", "store.x", 1500, 10, now=4.0)  # bigger than the store: it alone stays
    assert sorted(book.at["store.x"]) == ["d4"]
    assert book.take("a")["staging"][0].target == "store.x" and book.take("a") == {}
    assert load_name(reader("t")) == "imagenet" and load_name(reader("t", name=None)) is None


def test_a_gang_waiting_for_a_site_has_its_data_staged_there_ahead():
    s = east_only()
    busy = Task(id="busy", type="training-data-parallel", peers=4, resources={"cards": 8}, submitted_at=NOW,
                expected_duration_s=1000.0)
    assert s.decide(busy, NOW).status == "placed"
    d = s.decide(reader("g", peers=2), NOW + 1)
    # no room now: it waits for rack e1 (frees at NOW + 1000), and its data is copied there meanwhile
    assert d.status != "placed" and [(x.source, x.target) for x in d.staging] == [("store.west", "store.east")]
    assert d.waits_for == ["n0", "n1"] and d.nodes == []  # the set it waits for: where a runner copies ahead
    assert ("g", "store.west", E1) in [e[:3] for e in s.path_book.entries]  # the copy is booked on the path
    assert s.decide(reader("g", peers=2), NOW + 2).staging == []  # asked again: staged once
    s.end("busy")
    # at NOW + 1000 the copy (2,000 s from NOW + 1) has 1,001 s to go: 1,001 + 400 s, not 2,000 s, then
    # its run in one rack (400 Gbit/s NICs 0.05 ms apart)
    placed = s.retry_pending(NOW + 1000)
    assert [p.task_id for p in placed] == ["g"]
    run = float(run_seconds(3600.0, 1.0, TRAINING_COMM_SHARE, 2, 0.05, 400.0))
    assert placed[0].expected_completion_s == pytest.approx(1001 + 400 + run, abs=2)
    # the placement carries the copy again: a runner copies only what a placement carries (the Slurm
    # bridge runs it before the job and points the job at the copy), and none said it was made
    assert [(x.source, x.target) for x in placed[0].staging] == [("store.west", "store.east")]
    assert placed[0].data_at.store == "store.east" and placed[0].waits_for == []


def test_the_head_of_the_queue_has_its_data_staged_at_its_reservation_ahead():
    s = east_only()
    busy = Task(id="busy", type="training-data-parallel", peers=4, resources={"cards": 8}, submitted_at=NOW,
                expected_duration_s=1000.0)
    assert s.decide(busy, NOW).status == "placed"
    d = s.decide(reader("h"), NOW + 1)  # one node, no room: queued (a one-node task waits for no set)
    assert d.status != "placed" and d.staging == [] and d.waits_for == []
    assert s.retry_pending(NOW + 2) == []
    # the head holds a reservation on the node that frees first (NOW + 1,000); its data is copied to
    # east's store from now: 500 GB over 2 Gbit/s, ready at NOW + 2,002 — booked on the path
    assert s.reservation.task_id == "h" and s.reservation.start == pytest.approx(NOW + 1000)
    assert s.copies.holding("imagenet") == [("store.east", pytest.approx(NOW + 2002))]
    assert ("h", "store.west", E1) in [e[:3] for e in s.path_book.entries]
    (task, q), = s.take_ahead()  # the queued decision a runner copies ahead by: the copy, the node
    assert task.id == "h" and q.status == "unschedulable" and q.waits_for == s.reservation.nodes
    assert [(x.source, x.target, x.expected_s) for x in q.staging] == [("store.west", "store.east", pytest.approx(2000))]
    assert s.take_ahead() == []
    s.retry_pending(NOW + 3)  # asked again: the copy is coming, nothing staged again
    assert s.take_ahead() == [] and len(s.copies.holding("imagenet")) == 1
    s.end("busy")
    # at NOW + 1,000: the copy has 1,002 s to go, then 400 s from east's store (10 Gbit/s): 1,402 s of
    # load against 2,000 s from the origin, then its 3,600 s of run
    placed = s.retry_pending(NOW + 1000)
    assert [p.task_id for p in placed] == ["h"] and placed[0].nodes == q.waits_for
    assert placed[0].expected_completion_s == pytest.approx(1002 + 400 + 3600, abs=2)
    assert placed[0].data_at.store == "store.east"  # it reads the copy, carried again until made
    assert [(x.source, x.target) for x in placed[0].staging] == [("store.west", "store.east")]
    # staging off: the head waits as before and loads from the origin
    off = east_only()
    off.copies = CopyBook(store="")
    off.decide(busy, NOW), off.decide(reader("h"), NOW + 1), off.retry_pending(NOW + 2)
    assert off.take_ahead() == [] and off.copies.at == {}


def test_a_copy_staged_ahead_is_not_carried_again_once_made_or_where_the_task_is_not_placed():
    s = east_only()
    book = s.copies
    book.stage("g", "imagenet", "store.west", "store.east", 500, 2000, now=NOW)
    assert [x.target for x in book.take("g")["staging"]] == ["store.east"]  # the waiting decision's
    assert book.take("g", "store.north") == {}  # placed at another site: that copy is not its data
    book.stage("h", "coco", "store.west", "store.east", 100, 400, now=NOW)
    book.take("h")
    book.arrived([{"name": "coco", "target": "store.east"}], NOW + 300)  # a runner made it
    assert book.take("h", "store.east") == {}
    assert book.holding("coco") == [("store.east", pytest.approx(NOW + 300))]


def test_a_restarted_worker_knows_the_copies_its_records_say_were_staged():
    from schemas.api import TaskRecord

    s = east_only()
    d = s.decide(reader("t1"), NOW)  # stages imagenet at store.east, expected in 2,000 s
    rec = TaskRecord(task=reader("t1").model_dump(mode="json"), status="placed", nodes=d.nodes,
                     history=[{"decision": d.model_dump(mode="json")}])
    fresh = CopyBook(capacity_gb=600)
    assert fresh.restore([rec]) == 1
    assert fresh.holding("imagenet") == [("store.east", pytest.approx(NOW + 2000))]
    # the runner said it was done at NOW + 1,500: ready from then
    done = rec.model_copy(update={"history": rec.history + [{"event": {
        "task_id": "t1", "event": "staged", "at": NOW + 1500, "staged": [{"name": "imagenet", "target": "store.east"}]}}]})
    again = CopyBook(capacity_gb=600)
    again.restore([done])
    assert again.holding("imagenet") == [("store.east", pytest.approx(NOW + 1500))]
    # a store holds what its capacity allows: the least recently used copy goes
    small = CopyBook(capacity_gb=100)
    small.restore([done])
    assert small.holding("imagenet") == []
