"""The network and compute views, kept in Faust tables on the single-partition state topics.

- `netstate`: one record per path (key ``src|dst``) and per node (``node|``, node-local metrics),
  updated from netstate.windows; the newest window of each metric wins.
- `compute`: the latest report per node from compute.nodes, with the time it was received; a node
  silent past CNSCHED_NODE_TIMEOUT_SECONDS, or reporting status leaving/down, is unavailable.
Both topics have one partition, so one worker owns each whole view; HTTP reads are routed to it.
"""

from __future__ import annotations

import json
import logging
import time

import faust
import pydantic_core
from pydantic import TypeAdapter, ValidationError

from schemas.compute import ComputeReport
from schemas.windows import WindowResult
from streams.adapters.network import PathColumns, merge_metric
from streams.config import Settings
from streams.kafka import COMPUTE_TABLE, NETSTATE_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import failed, guarded, raw_value, validated

log = logging.getLogger(__name__)


def encode(record: dict) -> bytes:
    """A record as the table keeps it: JSON (pydantic_core's encoder, 4-5x json.dumps on a path's
    record; compact, NaN and infinities as Python's json writes them, every float read back the same)."""
    return pydantic_core.to_json(record)


class _ParsedView:
    """A table of JSON records with a parsed copy kept in step with the writes made through it.

    ``version`` grows with every write; readers (the scheduler) cache what they derive per version.
    The parsed copy is rebuilt from the table when it may have changed underneath (recovery after a
    rebalance: :meth:`invalidate`).
    """

    def __init__(self, table) -> None:
        self.table = table
        self.version = 0
        self.on_change = lambda: None  # the scheduler's version bump
        self._parsed: dict[bytes, dict] | None = None

    def _all(self) -> dict[bytes, dict]:
        if self._parsed is None:
            self._parsed = {k: json.loads(v) for k, v in list(self.table.items()) if v}
        return self._parsed

    def invalidate(self) -> None:
        self._parsed = None
        self.version += 1
        self.on_change()

    def put(self, key: bytes, record: dict) -> None:
        self.table[key] = encode(record)
        self._all()[key] = record
        self.version += 1
        self.on_change()

    def put_many(self, items: dict[bytes, dict]) -> None:
        """:meth:`put` of each record, one version step for all (a step of window results)."""
        parsed = self._all()
        for key, record in items.items():
            self.table[key] = encode(record)
            parsed[key] = record
        self.version += 1
        self.on_change()

    def delete(self, key: bytes) -> bool:
        """The record leaves the table (a tombstone on its changelog); whether there was one."""
        if key not in self._all():
            return False
        del self.table[key]
        self._all().pop(key, None)
        self.version += 1
        self.on_change()
        return True

    def get_key(self, key: bytes) -> dict | None:
        return self._all().get(key)

    def records(self) -> list[dict]:
        return list(self._all().values())


class NetState(_ParsedView):
    def __init__(self, table, step_s: float = 0.0) -> None:
        super().__init__(table)
        self.step_s = step_s  # the degradation detector's step (PathColumns)
        self._columns: PathColumns | None = None
        self._seed: tuple | None = None  # stored window p95s for the detector (kept across rebuilds)

    def get(self, src: str, dst: str) -> dict | None:
        return self.get_key(f"{src}|{dst}".encode())

    def columns(self) -> PathColumns:
        """The records as columns (built once, then updated by every put)."""
        if self._columns is None:
            self._columns = PathColumns(self.records(), self.step_s)
            if self._seed is not None:
                self._columns.seed(*self._seed)
        return self._columns

    def seed_history(self, paths: list[tuple[str, str]], ends, p95) -> int:
        """The detector's memory from stored windows (PathColumns.seed); returns the windows added."""
        cols = self.columns()
        self._seed = (paths, ends, p95)
        return cols.seed(paths, ends, p95)

    def put(self, key: bytes, record: dict) -> None:
        if self._columns is not None:
            self._columns.set(record)
        super().put(key, record)

    def put_many(self, items: dict[bytes, dict]) -> None:
        if self._columns is not None:
            self._columns.set_records(list(items.values()))
        super().put_many(items)

    def invalidate(self) -> None:
        self._columns = None
        super().invalidate()


class Inventory(_ParsedView):
    def records(self) -> list[dict]:
        return sorted(super().records(), key=lambda r: r["node"])


def register(app: faust.App, topics, settings: Settings, counters: Counters) -> tuple[NetState, Inventory]:
    counters.describe("window_results_total", "netstate.windows messages applied to the network view")
    counters.describe("window_results_rejected_total", "netstate.windows messages that were not window results")
    counters.describe("compute_reports_total", "compute.nodes reports applied")
    counters.describe("messages_failed_total", "messages whose handling raised: logged, dead-lettered, skipped")
    counters.describe("compute_reports_rejected_total", "compute.nodes reports sent to compute.deadletter, by reason")
    net_table = app.Table(table_name(settings, NETSTATE_TABLE), key_type=bytes, value_type=bytes, partitions=1)
    inv_table = app.Table(table_name(settings, COMPUTE_TABLE), key_type=bytes, value_type=bytes, partitions=1)
    net, inv = NetState(net_table, settings.detector_step_seconds), Inventory(inv_table)

    @app.agent(topics.windows, name="netstate")
    async def netstate_agent(stream):
        # window results come in steps (a window's end brings one per path and metric at once): each
        # path's record merged over the step and written once, the columns updated once per step
        async for events in stream.take_events(settings.take_max_messages, settings.take_within_seconds):
            # a table write asks the current event for its changelog partition (the topic has one);
            # Faust sets it per event only when iterating one at a time
            stream._set_current_event(events[-1])
            await apply_windows(net, events, counters)

    @app.agent(topics.compute_nodes, name="inventory")
    async def inventory_agent(stream):
        async for event in stream.events():
            report, reason = await validated(ComputeReport, event, topics.compute_deadletter)
            if report is None:
                counters.inc("compute_reports_rejected_total", reason=reason)
                continue
            doc = report.model_dump(mode="json")
            doc["received_at"] = time.time()
            # when the node was first seen, kept in its record (the table's changelog keeps it over a
            # restart: a restarted scheduler does not take every node for newly joined)
            prev = inv.get_key(report.node.encode())
            doc["first_seen_at"] = (prev or {}).get("first_seen_at") or doc["received_at"]
            if await guarded(event, topics.compute_deadletter, counters,
                             lambda report=report, doc=doc: _put(inv, report.node.encode(), doc)):
                counters.inc("compute_reports_total")

    @app.on_partitions_assigned.connect
    async def on_assigned(app, assigned, **kwargs):
        net.invalidate()  # recovered from the changelog: parse again on first use
        inv.invalidate()

    return net, inv


_STEP = TypeAdapter(list[WindowResult])


def window_results(events, counters: Counters) -> list[tuple[object, dict]]:
    """(event, window result as a dict) of each valid message of a step, in order: the whole step
    validated in one call when every message is one window result (the usual case: a list of their
    bytes, its length checked against the step's), else message by message, each one that is not a
    window result counted and logged."""
    raws = [raw_value(e) for e in events]
    try:
        dicts = _STEP.dump_python(_STEP.validate_json(b"[" + b",".join(raws) + b"]"))
        if len(dicts) == len(raws):
            return list(zip(events, dicts, strict=True))
    except (ValidationError, ValueError):
        pass
    out = []
    for event, raw in zip(events, raws, strict=True):
        try:
            out.append((event, WindowResult.model_validate_json(raw).model_dump()))
        except (ValidationError, ValueError, TypeError):
            counters.inc("window_results_rejected_total")
            log.warning("not a window result at %s:%d@%d", event.message.topic,
                        event.message.partition, event.message.offset)
    return out


async def apply_windows(net: NetState, events, counters: Counters) -> None:
    """A step of netstate.windows messages into the network view: each valid window result merged into
    its path's record (newer wins, per metric), every record the step touched written once. One that
    is not a window result is counted and logged; one whose handling raises is logged and counted
    (``deadletter.failed``) and the rest go on."""
    merged: dict[bytes, dict] = {}
    last: dict[bytes, object] = {}  # key -> the step's last event for it (blamed if its write fails)
    count: dict[bytes, int] = {}  # key -> the step's window results merged into it
    for event, w in window_results(events, counters):
        src, dst, metric = w.pop("src"), w.pop("dst"), w.pop("metric")  # the rest is the metric's entry
        key = f"{src}|{dst}".encode()
        try:
            merged[key] = merge_metric(merged.get(key) or net.get_key(key), src, dst, metric, w)
        except Exception as exc:  # the message, not the worker
            await failed(event, None, counters, exc)
            continue
        last[key], count[key] = event, count.get(key, 0) + 1
    if not merged:
        return
    try:
        net.put_many(merged)
    except Exception:  # one by one: the record that fails is blamed on its last message, the rest kept
        log.exception("a step of %d path records failed; writing them one by one", len(merged))
        for key, record in merged.items():
            if not await guarded(last[key], None, counters, lambda key=key, record=record: _put(net, key, record)):
                count[key] = 0
    counters.inc("window_results_total", sum(count.values()))


async def _put(table, key: bytes, value) -> None:
    table.put(key, value)
