"""The DuckDB store: one writer process, batches in through Arrow, idempotent under redelivery.

Every table has a natural primary key and rows go in with INSERT OR IGNORE, so a message delivered
twice is stored once: window results by (src, dst, metric, window_start, window_end), decisions by
(task_id, decided_at), their ranked candidates by (task_id, decided_at, rank), migrations by
(task_id, moved_at), task lifecycle events by (task_id, event, event_at), compute reports by (node, ts). Schema changes are numbered migrations recorded in ``schema_version``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from schemas.compute import node_class
from schemas.windows import WINDOW_ARROW_SCHEMA
from sinks.migrations import MIGRATIONS, SCHEMA_VERSION

# files are written in the storage format of DuckDB 1.4, so any DuckDB client from 1.4 on (the
# `duckdb` CLI included) can read them, whatever newer library version the sink runs
STORAGE_COMPATIBILITY = "v1.4.0"


_DECISIONS = pa.schema([
    ("task_id", pa.string()), ("decided_at", pa.float64()), ("status", pa.string()),
    ("nodes", pa.list_(pa.string())), ("alpha", pa.float64()), ("network_profile", pa.string()),
    ("composite", pa.float64()), ("compute_score", pa.float64()), ("network_score", pa.float64()),
    ("compute_only_nodes", pa.list_(pa.string())), ("state_version", pa.int64()),
    ("rejected_counts", pa.string()), ("doc", pa.string()),
    # migration 4 (appended columns)
    ("task_type", pa.string()), ("submitted_at", pa.float64()), ("cards", pa.int32()), ("peers", pa.int32()),
    ("compute_only_composite", pa.float64()), ("compute_only_network_score", pa.float64()),
])
_COMPUTE = pa.schema([
    ("node", pa.string()), ("ts", pa.float64()), ("status", pa.string()), ("region", pa.string()),
    ("accel_class", pa.string()), ("cards", pa.int32()), ("free_cards", pa.int32()),
    ("availability", pa.float64()), ("queue_delay_s", pa.float64()), ("doc", pa.string()),
])
_CANDIDATES = pa.schema([
    ("task_id", pa.string()), ("decided_at", pa.float64()), ("rank", pa.int32()), ("node", pa.string()),
    ("compute_score", pa.float64()), ("network_score", pa.float64()), ("alpha", pa.float64()),
    ("composite", pa.float64()),
])
_TASK_EVENTS = pa.schema([
    ("task_id", pa.string()), ("event", pa.string()), ("event_at", pa.float64()), ("nodes", pa.list_(pa.string())),
    ("duration_s", pa.float64()), ("throughput", pa.float64()), ("unit", pa.string()),
    ("utilisation", pa.float64()), ("request_rate", pa.float64()), ("latency_ms", pa.float64()),
    ("requested_by", pa.string()), ("reason", pa.string()), ("priority", pa.int32()),  # an operator's command
    ("steps_done", pa.int64()), ("steps_total", pa.int64()),  # progress
    ("load_s", pa.float64()),  # loaded: its data's load time on its nodes
])
_INCIDENTS = pa.schema([
    ("node", pa.string()), ("detected_at", pa.float64()), ("status", pa.string()), ("cause", pa.string()),
    ("located_at", pa.float64()), ("recovered_at", pa.float64()), ("tasks", pa.list_(pa.string())),
    ("work_lost_s", pa.float64()), ("mitigated_at", pa.float64()), ("resolution", pa.string()),
    ("outcomes", pa.string()),  # JSON: task id -> what became of it
    ("scope", pa.string()), ("nodes", pa.list_(pa.string())),  # node, site or path; a site's or path's nodes
])
_MAINTENANCE = pa.schema([
    ("node", pa.string()), ("issued_at", pa.float64()), ("action", pa.string()), ("deadline_s", pa.float64()),
    ("requested_by", pa.string()), ("reason", pa.string()),
])
_ROUTES = pa.schema([
    ("service_id", pa.string()), ("version", pa.int64()), ("computed_at", pa.float64()), ("trigger", pa.string()),
    ("origin", pa.string()), ("endpoint", pa.string()), ("replica", pa.string()), ("node", pa.string()),
    ("address", pa.string()), ("weight", pa.int32()), ("share", pa.float64()), ("rtt_ms", pa.float64()),
    ("warm", pa.bool_()), ("origin_rate", pa.float64()), ("expected_response_ms", pa.float64()),
    ("request_rate", pa.float64()), ("capacity_per_replica", pa.float64()), ("rate_known", pa.bool_()),
    ("overloaded", pa.bool_()), ("compute_ms", pa.float64()),
])
_QUOTA_CHANGES = pa.schema([
    ("changed_at", pa.float64()), ("teams", pa.list_(pa.string())), ("entries", pa.int32()), ("doc", pa.string()),
])
_REJECTS = pa.schema([
    ("topic", pa.string()), ("part", pa.int32()), ("offset", pa.int64()), ("reason", pa.string()),
    ("detail", pa.string()), ("original", pa.binary()), ("rejected_at", pa.float64()),
    ("original_size", pa.int64()),  # migration 14: the message's size (``original`` may be its head only)
])
_RESCHEDULES = pa.schema([
    ("task_id", pa.string()), ("moved_at", pa.float64()), ("from_nodes", pa.list_(pa.string())),
    ("to_nodes", pa.list_(pa.string())), ("trigger", pa.string()), ("expected_gain_s", pa.float64()),
    ("migration_cost_s", pa.float64()), ("before_composite", pa.float64()), ("after_composite", pa.float64()),
    ("state_version", pa.int64()), ("transfer_gb", pa.float64()),
])


class StoreError(RuntimeError):
    """The database file cannot be used; the message says why and how to recover."""


class StoreBusy(StoreError):
    """Another process holds the file right now (DuckDB: one writer, or readers, at a time)."""


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text or "being used by another process" in text


class DuckStore:
    """One connection to the file. ``read_only`` connections never migrate or write."""

    def __init__(self, path: str | Path, read_only: bool = False, external_access: bool = True) -> None:
        """``external_access=False``: queries cannot read or write any other file, nor load extensions
        (DuckDB's enable_external_access, which a query cannot turn back on)."""
        self.path = str(path)
        self.read_only = read_only
        if read_only and not Path(self.path).exists():
            raise StoreError(f"no DuckDB file at {self.path}: start `cnsched sink` (it creates it)")
        try:
            config: dict = {} if read_only else {"storage_compatibility_version": STORAGE_COMPATIBILITY}
            if not external_access:
                config.update(enable_external_access=False, autoinstall_known_extensions=False,
                              autoload_known_extensions=False)
            self.con = duckdb.connect(self.path, read_only=read_only, config=config)
            self.con.execute("SET enable_progress_bar = false")  # a long query prints no bar into a command's output
        except duckdb.Error as exc:
            if _is_lock_error(exc):
                raise StoreBusy(f"{self.path} is in use by another process: {exc}") from None
            raise StoreError(
                f"cannot open DuckDB file {self.path}: {exc}. If it is corrupt, move it away; "
                "the sink rebuilds it from the topics (a new consumer group reads from the start)"
            ) from None
        if not read_only:
            self.migrate()

    @classmethod
    def open(cls, path: str | Path, read_only: bool = False, timeout_s: float = 10.0,
             external_access: bool = True) -> DuckStore:
        """Open, waiting up to ``timeout_s`` while another process holds the file."""
        import time

        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while True:
            try:
                return cls(path, read_only, external_access)
            except StoreBusy:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def __enter__(self) -> DuckStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def migrate(self) -> int:
        self.con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self.con.execute("SELECT max(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version in range(current + 1, SCHEMA_VERSION + 1):
            self.con.execute("BEGIN")
            self.con.execute(MIGRATIONS[version])
            self.con.execute("INSERT INTO schema_version VALUES (?)", [version])
            self.con.execute("COMMIT")
        return SCHEMA_VERSION

    def write_windows(self, rows: list[dict]) -> int:
        """Insert window results (one Arrow batch); return how many were new."""
        return self._insert("windows", rows, WINDOW_ARROW_SCHEMA)

    def write_windows_json(self, values: list[bytes]) -> tuple[int, list[int]]:
        """Insert window results straight from their JSON messages: parsed by Arrow in one pass (no
        Python object per row). Returns (new rows, positions of the skipped messages).

        A batch the typed reader refuses is split in halves until the refused messages are alone, so
        one bad message among n costs about 2 log2(n) parses of shrinking halves, not n one-message
        writes. A message refused alone is read by its contract (schemas.windows.WindowResult, which
        takes ``"5"`` for 5) and stored as the validated record when it keeps it; else it is skipped."""
        import io

        import pyarrow.json as pj

        options = pj.ParseOptions(explicit_schema=WINDOW_ARROW_SCHEMA, unexpected_field_behavior="ignore")
        try:
            table = pj.read_json(io.BytesIO(b"\n".join(v.replace(b"\n", b" ") for v in values)),
                                 parse_options=options)
            return self._insert_table("windows", table.select(WINDOW_ARROW_SCHEMA.names)), []
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, duckdb.Error):
            if len(values) == 1:
                return self._window_by_contract(values[0])
            mid = len(values) // 2
            a_stored, a_bad = self.write_windows_json(values[:mid])
            b_stored, b_bad = self.write_windows_json(values[mid:])
            return a_stored + b_stored, a_bad + [mid + i for i in b_bad]

    def _window_by_contract(self, value: bytes) -> tuple[int, list[int]]:
        from pydantic import ValidationError

        from schemas.windows import WindowResult

        try:
            row = WindowResult.model_validate_json(value).model_dump()
            return self._insert("windows", [row], WINDOW_ARROW_SCHEMA), []
        except (ValidationError, ValueError, OverflowError, pa.ArrowException, duckdb.Error):
            return 0, [0]

    def _insert(self, table: str, rows: list[dict], schema: pa.Schema) -> int:
        if not rows:
            return 0
        return self._insert_table(table, pa.Table.from_pylist(rows, schema=schema))

    def write_replay(self, run_id: str, runs: list[dict], changes: list[dict], jobs: list[dict],
                     headline: list[dict] = ()) -> None:
        """One replay (``cnsched simulate``): its summaries, changes, jobs and headline, each row keyed
        by the run id (written again, the same run replaces itself)."""
        self.con.execute("BEGIN")
        for table, rows in (("sim_runs", runs), ("sim_changes", changes), ("sim_jobs", jobs),
                            ("sim_headline", list(headline))):
            self.con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            if rows:
                batch = pa.Table.from_pylist([{"run_id": run_id, **r} for r in rows])  # noqa: F841 (read by SQL)
                cols = ", ".join(batch.column_names)
                self.con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM batch")
        self.con.execute("COMMIT")

    def _insert_table(self, table: str, batch: pa.Table) -> int:
        if batch.num_rows == 0:
            return 0
        # DuckDB answers an INSERT with the number of rows it inserted (ignored duplicates excluded)
        return int(self.con.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM batch").fetchone()[0])

    def write_decisions(self, docs: list[dict]) -> int:
        """Decisions (sched.decisions messages) and their ranked candidates; return how many new."""
        import json

        rows, cands = [], []
        for d in docs:
            chosen = next((c for c in d.get("candidates", []) if c["node"] in d.get("nodes", [])), None)
            rows.append({
                "task_id": d["task_id"], "decided_at": d["decided_at"], "status": d["status"],
                "nodes": d.get("nodes", []), "alpha": d.get("alpha"), "network_profile": d.get("network_profile"),
                "composite": chosen and chosen["composite"], "compute_score": chosen and chosen["compute_score"],
                "network_score": chosen and chosen["network_score"],
                "compute_only_nodes": d.get("compute_only_nodes", []), "state_version": d.get("state_version"),
                "rejected_counts": json.dumps(d.get("rejected_counts", {})), "doc": json.dumps(d),
                **{k: d.get(k) for k in ("task_type", "submitted_at", "cards", "peers", "compute_only_composite",
                                         "compute_only_network_score")},
            })
            for rank, c in enumerate(d.get("candidates", []), start=1):
                cands.append({"task_id": d["task_id"], "decided_at": d["decided_at"], "rank": rank, **{
                    k: c[k] for k in ("node", "compute_score", "network_score", "alpha", "composite")}})
        new = self._insert("decisions", rows, _DECISIONS)
        self._insert("decision_candidates", cands, _CANDIDATES)
        return new

    def write_reschedules(self, docs: list[dict]) -> int:
        rows = [{
            "task_id": d["task_id"], "moved_at": d["at"], "from_nodes": d["from_nodes"], "to_nodes": d["to_nodes"],
            "trigger": d["trigger"], "expected_gain_s": d["expected_gain_s"], "migration_cost_s": d["migration_cost_s"],
            "before_composite": d["before"]["composite"], "after_composite": d["after"]["composite"],
            "state_version": d.get("state_version"), "transfer_gb": d.get("transfer_gb"),
        } for d in docs]
        return self._insert("reschedules", rows, _RESCHEDULES)

    def write_compute_reports(self, docs: list[dict]) -> int:
        """compute.nodes reports (the inventory over time: cards, free cards, availability)."""
        import json

        rows = [{"node": d["node"], "ts": d["ts"], "status": d.get("status", "up"), "region": d.get("region", ""),
                 "accel_class": node_class(d),
                 "cards": d.get("cards", 0), "free_cards": (d.get("free") or {}).get("cards"),
                 "availability": d.get("availability"), "queue_delay_s": d.get("queue_delay_s"),
                 "doc": json.dumps(d)} for d in docs]
        return self._insert("compute_reports", rows, _COMPUTE)

    def write_task_events(self, docs: list[dict]) -> int:
        rows = [{"task_id": d["task_id"], "event": d["event"], "event_at": d["at"], "nodes": d.get("nodes", []),
                 "duration_s": d.get("duration_s"), "throughput": d.get("throughput"),
                 "unit": d.get("unit", "samples/s"), "utilisation": d.get("utilisation"),
                 "request_rate": d.get("request_rate"), "latency_ms": d.get("latency_ms"),
                 "requested_by": d.get("by"), "reason": d.get("reason"), "priority": d.get("priority"),
                 "steps_done": d.get("steps_done"), "steps_total": d.get("steps_total"),
                 "load_s": d.get("load_s")} for d in docs]
        return self._insert("task_events", rows, _TASK_EVENTS)

    def write_incidents(self, docs: list[dict]) -> int:
        """sched.incidents messages: one row per incident and status (open, mitigated, recovered)."""
        import json

        rows = [{k: d.get(k) for k in _INCIDENTS.names} | {"outcomes": json.dumps(d.get("outcomes") or {}),
                                                           "scope": d.get("scope") or "node"} for d in docs]
        return self._insert("incidents", rows, _INCIDENTS)

    def write_quota_changes(self, docs: list[dict]) -> int:
        """sched.quotas messages: every quota set asked for, with its time (a refused one is also in
        sched.deadletter); keyed by that time, so once each under redelivery."""
        import json

        rows = [{"changed_at": d.get("changed_at") or 0.0, "teams": sorted({q["team"] for q in d.get("quotas", [])}),
                 "entries": len(d.get("quotas", [])), "doc": json.dumps(d)} for d in docs]
        return self._insert("quota_changes", rows, _QUOTA_CHANGES)

    def write_maintenance(self, docs: list[dict]) -> int:
        """sched.maintenance messages: every cordon, drain and uncordon (the audit of node maintenance)."""
        rows = [{"node": d.get("node"), "issued_at": d.get("at"), "action": d.get("action"),
                 "deadline_s": d.get("deadline_s"), "requested_by": d.get("by"), "reason": d.get("reason")} for d in docs]
        return self._insert("node_maintenance", rows, _MAINTENANCE)

    def write_routes(self, docs: list[dict]) -> int:
        """sched.routes messages: one row per service version, origin and replica (its weight and why:
        the measured RTT, warmth, the rates it was computed for); a redelivered version is stored once."""
        top = ("request_rate", "capacity_per_replica", "rate_known", "overloaded", "compute_ms", "computed_at",
               "trigger", "version", "service_id")
        rows = [{**{k: d.get(k) for k in top}, "origin": o.get("origin"), "endpoint": o.get("endpoint"),
                 "origin_rate": o.get("request_rate"), "expected_response_ms": o.get("expected_response_ms"),
                 **{k: x.get(k) for k in ("replica", "node", "address", "weight", "share", "rtt_ms", "warm")}}
                for d in docs for o in d.get("origins") or () for x in o.get("replicas") or ()]
        return self._insert("routes", rows, _ROUTES)

    def write_rejects(self, rows: list[dict], max_rows: int | None = None, max_age_s: float | None = None) -> int:
        """Messages the sink would not store (``sink_rejects``: topic, part, offset, reason, detail, the
        original bytes or their head, their size), once each under redelivery. Then the table is kept
        within ``max_rows`` (the newest) and ``max_age_s`` (by ``rejected_at``, from the newest row)."""
        n = self._insert("sink_rejects", rows, _REJECTS)
        if max_age_s is not None:
            self.con.execute("DELETE FROM sink_rejects WHERE rejected_at < (SELECT max(rejected_at) FROM sink_rejects) - ?",
                             [max_age_s])
        if max_rows is not None:
            self.con.execute("""DELETE FROM sink_rejects WHERE rowid IN (SELECT rowid FROM sink_rejects
                ORDER BY rejected_at DESC, topic, part, "offset" DESC OFFSET ?)""", [max_rows])
        return n

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def close(self) -> None:
        self.con.close()
