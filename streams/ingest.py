"""Ingest agent: probe.samples -> decode + validate -> event-time windows -> netstate.windows.

Bad input never stops the agent: an undecodable message, or the bad rows of a batch, go to
probe.deadletter with the reason, the source topic/partition/offset and the original bytes.
"""

from __future__ import annotations

import base64
import json
import logging
import time

import faust

from schemas.probe import (
    MAX_LISTED,
    REASON_UNDECODABLE,
    DecodeError,
    RowError,
    decode_samples,
    validate_batch,
)
from schemas.windows import encode_window, window_key
from streams.config import Settings
from streams.metrics import Counters
from streams.windowing import WindowAccumulator

log = logging.getLogger(__name__)


def dead_letter(
    payload: bytes,
    topic: str,
    partition: int,
    offset: int,
    reason: str,
    detail: str,
    rows: list[RowError] | None = None,
    rows_rejected: int | None = None,
    rows_total: int | None = None,
) -> bytes:
    doc = {
        "reason": reason,
        "detail": detail,
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "rows_total": rows_total,
        "rows_rejected": rows_rejected,
        "rows": [r.as_dict() for r in (rows or [])[:MAX_LISTED]],
        "original_b64": base64.b64encode(payload).decode(),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def register(app: faust.App, topics, settings: Settings, counters: Counters) -> None:
    counters.describe("messages_total", "probe.samples messages read")
    counters.describe("samples_accepted_total", "probe samples that passed validation")
    counters.describe("samples_rejected_total", "probe samples sent to the dead-letter topic")
    counters.describe("samples_late_total", "samples later than the allowed lateness, dropped")
    counters.describe("windows_emitted_total", "window results sent to netstate.windows")
    accumulators: dict[int, WindowAccumulator] = {}

    @app.agent(topics.samples, name="ingest")
    async def ingest(stream):
        async for event in stream.events():
            msg = event.message
            payload = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            counters.inc("messages_total")
            try:
                batch = decode_samples(payload)
            except DecodeError as exc:
                counters.inc("samples_rejected_total", reason=REASON_UNDECODABLE)
                await topics.deadletter.send(
                    key=msg.key,
                    value=dead_letter(payload, msg.topic, msg.partition, msg.offset,
                                      REASON_UNDECODABLE, str(exc)),
                )
                continue
            check = validate_batch(batch, time.time(), settings.max_clock_skew_seconds)
            if check.rejected:
                for reason, n in check.rejected.items():
                    counters.inc("samples_rejected_total", n, reason=reason)
                await topics.deadletter.send(
                    key=msg.key,
                    value=dead_letter(payload, msg.topic, msg.partition, msg.offset,
                                      ",".join(sorted(check.rejected)),
                                      f"{check.rejected_total} of {len(batch)} rows rejected",
                                      check.listed, check.rejected_total, len(batch)),
                )
            good = check.good
            counters.inc("samples_accepted_total", len(good))
            acc = accumulators.get(msg.partition)
            if acc is None:
                acc = accumulators[msg.partition] = WindowAccumulator(
                    settings.window_seconds, settings.window_step_seconds,
                    settings.allowed_lateness_seconds,
                )
            late = acc.add(good)
            if late:
                counters.inc("samples_late_total", late, reason="window_closed")
            for result in acc.close_ready():
                await topics.windows.send(key=window_key(result), value=encode_window(result))
                counters.inc("windows_emitted_total")
