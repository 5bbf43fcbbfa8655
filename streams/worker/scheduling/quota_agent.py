"""Team quotas in the worker: `sched.quotas` messages (a whole QuotaSet each, from PUT /quotas or
CNSCHED_QUOTAS_FILE) checked against the cluster and kept in the `quotas` table, which the scheduler's
QuotaBook reads. The table and the scheduler live on the worker that owns the single-partition state
topics. A set whose guarantees exceed the cluster is refused: `sched.deadletter` with the reason, and
the table's `rejected` entry says why (PUT /quotas answers 422 from it)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import faust
from faust.types import TP
from pydantic import ValidationError

from schemas.quota import DEFAULT_TEAM, QuotaSet
from streams.config import Settings
from streams.kafka import QUOTAS_TABLE, table_name
from streams.metrics import Counters
from streams.worker.deadletter import dead_letter, guarded, raw_value, validated
from streams.worker.scheduling.quotas import QuotaBook
from streams.worker.scheduling.view import SchedulerView

log = logging.getLogger(__name__)
KEY_SET, KEY_REJECTED = b"set", b"rejected"
OVER_CLUSTER = "quota_exceeds_cluster"


class QuotaState:
    """The quota table and the scheduler's quota book it feeds. ``class_cards()``: the cluster's cards
    per accelerator class (what a set's guarantees are checked against); ``changed()``: called once a
    new set is in force (what queued tasks may take has changed)."""

    def __init__(self, table, book: QuotaBook, class_cards: Callable[[], dict[str, int]],
                 changed: Callable[[], None], live: Callable[[], list] = list) -> None:
        self.table, self.book, self.class_cards, self.changed = table, book, class_cards, changed
        self.live = live  # () -> the Tasks queued or running (those a new set may strand)
        book.loader = self.current
        book.invalidate()

    def current(self) -> QuotaSet | None:
        raw = self.table.get(KEY_SET)
        return QuotaSet.model_validate_json(raw) if raw else None

    def rejected(self) -> dict | None:
        raw = self.table.get(KEY_REJECTED)
        return json.loads(raw) if raw else None

    def apply(self, qs: QuotaSet) -> list[tuple[str, str]]:
        """Put ``qs`` in force, or return (field, reason) of what exceeds the cluster or would strand
        live tasks of teams it does not name."""
        over = self.book.over_cluster(qs, self.class_cards()) or stranded(qs, self.live())
        if over:
            self.table[KEY_REJECTED] = json.dumps({"changed_at": qs.changed_at, "fields": [
                {"field": f, "reason": r} for f, r in over]}).encode()
            return over
        self.table[KEY_SET] = qs.model_dump_json().encode()
        self.book.replace(qs)
        self.changed()
        log.info("quotas now: %s", ", ".join(f"{q.team}/{q.accel_class} {q.guaranteed_cards}..{q.max_cards}"
                                            for q in qs.quotas) or "none")
        return []


def stranded(qs: QuotaSet, tasks: list) -> list[tuple[str, str]]:
    """(field, reason) when a non-empty ``qs`` names none of the teams some live ``tasks`` belong to
    (they would wait for ever) and it does not say ``allow_unnamed_teams``."""
    if not qs.quotas or qs.allow_unnamed_teams:
        return []
    named, left = set(qs.teams()), {}
    for t in tasks:
        team = t.team or DEFAULT_TEAM
        if team not in named:
            left.setdefault(team, []).append(t.id)
    if not left:
        return []
    teams = "; ".join(f"team {team} ({', '.join(sorted(ids)[:3])}{f' and {len(ids) - 3} more' if len(ids) > 3 else ''})"
                      for team, ids in sorted(left.items()))
    return [("quotas", f"live tasks of teams it does not name would wait for ever: {teams}; name those teams, "
                       "or send allow_unnamed_teams: true")]


def load_file(path) -> QuotaSet:
    """CNSCHED_QUOTAS_FILE as a QuotaSet (ValueError naming the file and the first bad field)."""
    try:
        return QuotaSet.model_validate_json(open(path, "rb").read())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "file"
        raise ValueError(f"{path}: {where}: {e['msg']}") from None


def register(app: faust.App, topics, settings: Settings, counters: Counters, sched,
             view: SchedulerView) -> QuotaState:
    counters.describe("quota_changes_total", "quota sets applied from sched.quotas, by outcome")
    table = app.Table(table_name(settings, QUOTAS_TABLE), key_type=bytes, value_type=bytes, partitions=1)
    state = QuotaState(table, sched.quotas, lambda: view.class_cards(time.time()), sched.books_changed,
                       lambda: [h.task for h in (*sched.running.values(), *sched.pending.values())])

    @app.agent(topics.quotas, name="quotas")
    async def quota_agent(stream):
        async for event in stream.events():
            qs, _ = await validated(QuotaSet, event, topics.sched_deadletter, "quotas: ")
            if qs is None:
                counters.inc("quota_changes_total", outcome="invalid")
                continue

            async def step(qs=qs, event=event):
                over = state.apply(qs)
                counters.inc("quota_changes_total", outcome="refused" if over else "applied")
                if over:
                    await topics.sched_deadletter.send(key=event.message.key, value=dead_letter(
                        raw_value(event), event.message, OVER_CLUSTER, "; ".join(r for _, r in over)))

            await guarded(event, topics.sched_deadletter, counters, step)

    @app.on_partitions_assigned.connect
    async def on_assigned(app, assigned, **kwargs):
        sched.quotas.invalidate()  # read from the recovered table on first use

    if settings.quotas_file is not None:
        seed = load_file(settings.quotas_file)  # a bad file stops the worker at start, naming the field

        @app.timer(interval=2.0)
        async def seed_quotas():
            """Send the file's quotas once this worker owns the table and finds none set."""
            if getattr(app, "_cnsched_quotas_seeded", False) or TP(topics.quotas.get_topic_name(), 0) \
                    not in app.consumer.assignment() or app.rebalancing or getattr(app, "in_recovery", False):
                return
            app._cnsched_quotas_seeded = True
            if state.current() is None:
                doc = seed.model_copy(update={"changed_at": time.time()})
                await topics.quotas.send(key=b"quotas", value=doc.model_dump_json().encode())
                log.info("quotas from %s sent (%d entries)", settings.quotas_file, len(seed.quotas))

    return state
