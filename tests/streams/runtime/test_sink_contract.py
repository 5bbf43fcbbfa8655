"""The sink stores what the contract validated, and keeps a bounded head of what it refuses."""

import json
from types import SimpleNamespace

from schemas.compute import ComputeReport
from schemas.sched import TaskEvent
from streams.runtime.sink_runner import checked


def message(value: bytes, offset: int = 0):
    return SimpleNamespace(topic="compute.nodes", partition=0, offset=offset, value=value)


def test_the_validated_record_is_stored_not_the_raw_json():
    """Issue 32, finding 4: "cards": true and numbers as strings keep the contract (the worker reads
    them as 1 and 7.5), but the raw JSON went to the store, which could not take it."""
    doc, bad = checked(message(json.dumps({"node": "n1", "ts": "1700000000.5", "cards": True,
                                           "free": {"cards": "1"}}).encode()), ComputeReport)
    assert bad is None
    assert (doc["ts"], doc["cards"], doc["free"]["cards"]) == (1700000000.5, 1, 1)
    doc, bad = checked(message(json.dumps({"task_id": "t1", "event": "started", "at": "11"}).encode()), TaskEvent)
    assert bad is None and doc["at"] == 11.0 and "nodes" not in doc  # fields left unset stay unset


def test_a_refused_message_keeps_its_head_and_its_size():
    big = b"[" * 100_000 + b"]" * 100_000
    doc, bad = checked(message(big, 7), ComputeReport, keep_bytes=1000)
    assert doc is None and bad["reason"] == "undecodable"
    assert (bad["original"], bad["original_size"], bad["offset"]) == (b"[" * 1000, 200_000, 7)
