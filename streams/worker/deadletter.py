"""Dead letters: what every *.deadletter topic carries for a message we could not use.

``{"reason", "detail", "source": {"topic", "partition", "offset"}, ...extra, "original_b64"}`` — the
reason, the place the message came from and its original bytes, so nothing is lost.
"""

from __future__ import annotations

import base64
import json
import logging

from pydantic import ValidationError

from schemas.api import field_errors

log = logging.getLogger(__name__)
REASON_INTERNAL = "internal_error"


def raw_value(event) -> bytes:
    """The event's value as the bytes that came off the wire."""
    return event.value if isinstance(event.value, bytes) else bytes(event.value or b"")


def dead_letter(payload: bytes, msg, reason: str, detail: str = "", **extra) -> bytes:
    doc = {
        "reason": reason,
        "detail": detail,
        "source": {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset},
        **extra,
        "original_b64": base64.b64encode(payload).decode(),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


async def validated(model, event, deadletter_topic, what: str = ""):
    """``(the message as `model`, None)``, or ``(None, reason)`` after sending it to the dead-letter
    topic with every invalid field (reason `undecodable` for broken JSON, else `schema`)."""
    raw = raw_value(event)
    try:
        return model.model_validate_json(raw), None
    except ValidationError as exc:
        errors = field_errors(exc)
        reason = "undecodable" if any(e["type"] == "json_invalid" for e in exc.errors()) else "schema"
        msg = event.message
        await deadletter_topic.send(key=msg.key, value=dead_letter(
            raw, msg, reason, f"{what}{len(errors)} invalid field(s)", errors=errors[:100]))
        return None, reason


async def guarded(event, deadletter_topic, counters, step) -> bool:
    """Run ``step()`` (the handling of one valid message); if it raises, log it, count it and send the
    message to ``deadletter_topic`` (None: log and count only) with reason `internal_error`, so one
    message nobody foresaw never stops its agent. True when the step succeeded."""
    try:
        await step()
        return True
    except Exception as exc:  # the message, not the worker
        await failed(event, deadletter_topic, counters, exc)
        return False


async def failed(event, deadletter_topic, counters, exc: Exception) -> None:
    """What :func:`guarded` does with a message whose handling raised ``exc`` (call it in the
    ``except`` block: the log carries the traceback): logged, counted, dead-lettered."""
    msg = event.message
    log.exception("message at %s:%d@%d not handled", msg.topic, msg.partition, msg.offset)
    counters.inc("messages_failed_total", topic=msg.topic)
    if deadletter_topic is not None:
        await deadletter_topic.send(key=msg.key, value=dead_letter(
            raw_value(event), msg, REASON_INTERNAL, f"{type(exc).__name__}: {str(exc)[:200]}"))
