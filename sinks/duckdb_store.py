"""The DuckDB store: one writer process, batches in through Arrow, idempotent under redelivery.

Window results are keyed by (src, dst, metric, window_start, window_end): a result delivered twice
is stored once (INSERT OR IGNORE against the primary key).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from schemas.windows import WINDOW_ARROW_SCHEMA

SCHEMA_VERSION = 1

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE windows (
        src VARCHAR NOT NULL, dst VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        window_start DOUBLE NOT NULL, window_end DOUBLE NOT NULL,
        count BIGINT NOT NULL, kept BIGINT NOT NULL, outliers BIGINT NOT NULL, lost BIGINT NOT NULL,
        mean DOUBLE, p50 DOUBLE, p95 DOUBLE, p99 DOUBLE, min DOUBLE, max DOUBLE,
        PRIMARY KEY (src, dst, metric, window_start, window_end)
    );
    """,
}


class StoreError(RuntimeError):
    """The database file cannot be used; the message says why and how to recover."""


class DuckStore:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self.con = duckdb.connect(self.path)
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open DuckDB file {self.path}: {exc}. If it is corrupt, move it away; "
                "the sink rebuilds it from the topics (a new consumer group reads from the start)"
            ) from None
        self.migrate()

    def migrate(self) -> int:
        self.con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self.con.execute("SELECT max(version) FROM schema_version").fetchone()
        current = row[0] or 0
        for version in range(current + 1, SCHEMA_VERSION + 1):
            self.con.execute("BEGIN")
            self.con.execute(_MIGRATIONS[version])
            self.con.execute("INSERT INTO schema_version VALUES (?)", [version])
            self.con.execute("COMMIT")
        return SCHEMA_VERSION

    def write_windows(self, rows: list[dict]) -> int:
        """Insert window results (one Arrow batch); return how many were new."""
        if not rows:
            return 0
        batch = pa.Table.from_pylist(rows, schema=WINDOW_ARROW_SCHEMA)  # noqa: F841 - read by SQL
        before = self.con.execute("SELECT count(*) FROM windows").fetchone()[0]
        self.con.execute("INSERT OR IGNORE INTO windows SELECT * FROM batch")
        return self.con.execute("SELECT count(*) FROM windows").fetchone()[0] - before

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def close(self) -> None:
        self.con.close()
