"""Bounded storage: probe windows are kept raw for a while, then as per-minute and per-hour roll-ups in
the same ``windows`` table, then dropped; compute reports thin to the last of each node's hour.

Every 10-s window of every probed path is ~10^8 rows a day at 1,000 nodes. :func:`compact` (the sink
runs it every ``CNSCHED_RETENTION_EVERY_SECONDS``) replaces, for buckets that ended before each cutoff:

- raw windows (shorter than a minute) older than ``raw_days`` by one row per path, metric and minute;
- rows of a minute or finer older than ``minute_days`` by one per hour;
- every row older than ``hour_days`` is deleted;
- compute reports older than ``raw_days``: the last of each node's hour is kept (what the cost report's
  as-of join reads), and none older than ``hour_days``.

A roll-up row is a window like the others (``window_end - window_start`` is its resolution: 60 or
3,600 s), so every reader — the forecasts' per-step averages, the detector's history, ad-hoc SQL —
reads it unchanged. Its ``count``, ``kept``, ``outliers`` and ``lost`` are the sums of its windows';
``min`` and ``max`` the extremes; ``mean``, ``p50``, ``p95`` and ``p99`` the averages of its windows'
weighted by the samples each kept (a percentile of an hour is not the mean of its windows'
percentiles: these are labelled as such in the README). A late raw window that lands in a bucket
already rolled up is merged into it at the next run (weighted by the bucket's kept samples), so a
rerun never counts a window twice. Idempotent: a second run with the same ``now`` changes nothing.

DuckDB reuses little of a deleted row's space (row groups keep their deleted rows until rewritten), so
rows stop growing and the file does not: :func:`copy_fresh` copies the database into a new file (``COPY
FROM DATABASE``: tables, keys, views, the schema version), which the caller puts in place of the old one
once it has closed it (the sink does so when the file has grown half again since its last copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DAY_S = 86_400.0
STATS = ("mean", "p50", "p95", "p99")
COPY_GROWTH = 1.5  # the file is copied fresh once it is this many times its size after the last copy


def copy_due(size: int, last_copy: int | None) -> bool:
    """Whether a file of ``size`` bytes is due a fresh copy (``last_copy``: its size after the last one;
    None: none since the process started). Worked: 150 MB after a 100 MB copy -> no; 151 MB -> yes."""
    return last_copy is None or size > COPY_GROWTH * last_copy


@dataclass(frozen=True)
class Retention:
    raw_days: float = 7.0
    minute_days: float = 90.0
    hour_days: float = 730.0

    def check(self) -> None:
        if not 0 < self.raw_days <= self.minute_days <= self.hour_days:
            raise ValueError("retention must grow: 0 < raw days <= minute days <= hour days "
                             f"(got {self.raw_days:g}, {self.minute_days:g}, {self.hour_days:g})")


def _weighted(stat: str) -> str:
    w = "greatest(kept, 1)"
    return (f"sum({stat} * {w}) FILTER (WHERE {stat} IS NOT NULL) / "
            f"sum({w}) FILTER (WHERE {stat} IS NOT NULL) AS {stat}")


def roll_up(con, resolution_s: float, cutoff: float) -> int:
    """Replace the rows finer than ``resolution_s`` (with any earlier roll-up of that resolution) in the
    buckets that end by ``cutoff`` with one row per path, metric and bucket; the buckets rolled."""
    params = {"r": resolution_s, "cutoff": cutoff}
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _touched AS
        SELECT DISTINCT src, dst, metric, floor(window_start / $r) * $r AS b FROM windows
        WHERE window_end - window_start < $r AND floor(window_start / $r) * $r + $r <= $cutoff""", params)
    buckets = con.execute("SELECT count(*) FROM _touched").fetchone()[0]
    if buckets:
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE _rolled AS
            SELECT src, dst, metric, b AS window_start, b + $r AS window_end, sum(count) AS count,
                   sum(kept) AS kept, sum(outliers) AS outliers, sum(lost) AS lost,
                   {', '.join(_weighted(s) for s in STATS)}, min(min) AS min, max(max) AS max
            FROM (SELECT w.*, floor(w.window_start / $r) * $r AS b FROM windows w
                  WHERE w.window_end - w.window_start <= $r)
            WHERE (src, dst, metric, b) IN (SELECT src, dst, metric, b FROM _touched)
            GROUP BY src, dst, metric, b""", {"r": resolution_s})
        con.execute("""
            DELETE FROM windows WHERE window_end - window_start <= $r
              AND (src, dst, metric, floor(window_start / $r) * $r) IN (SELECT src, dst, metric, b FROM _touched)""",
                    {"r": resolution_s})
        con.execute("""INSERT INTO windows (src, dst, metric, window_start, window_end, count, kept, outliers, lost,
                                            mean, p50, p95, p99, min, max)
                       SELECT src, dst, metric, window_start, window_end, count, kept, outliers, lost,
                              mean, p50, p95, p99, min, max FROM _rolled""")
    con.execute("DROP TABLE IF EXISTS _touched; DROP TABLE IF EXISTS _rolled")
    return int(buckets)


def compact(con, now: float, retention: Retention = Retention()) -> dict[str, int]:
    """Apply ``retention`` as of ``now`` (epoch seconds) in one transaction; what it did."""
    retention.check()
    raw_cut, minute_cut, hour_cut = (now - d * DAY_S for d in (retention.raw_days, retention.minute_days,
                                                               retention.hour_days))
    con.execute("BEGIN TRANSACTION")
    try:
        out = {"minute_buckets": roll_up(con, 60.0, raw_cut), "hour_buckets": roll_up(con, 3600.0, minute_cut)}
        out["windows_dropped"] = con.execute("DELETE FROM windows WHERE window_end <= $c",
                                             {"c": hour_cut}).fetchone()[0]
        out["reports_thinned"] = con.execute("""
            DELETE FROM compute_reports WHERE ts < $raw AND (node, ts) NOT IN (
                SELECT node, max(ts) FROM compute_reports WHERE ts < $raw GROUP BY node, floor(ts / 3600))""",
                                             {"raw": raw_cut}).fetchone()[0]
        out["reports_dropped"] = con.execute("DELETE FROM compute_reports WHERE ts < $c",
                                             {"c": hour_cut}).fetchone()[0]
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return out


def copy_fresh(con, target: Path) -> int:
    """Copy the database ``con`` has open into a new file ``target`` (replaced if it exists); its size in
    bytes. The copy holds the live rows only: put it in place of the old file after closing it."""
    target = Path(target)
    target.unlink(missing_ok=True)
    db = con.execute("SELECT current_database()").fetchone()[0]
    con.execute("CHECKPOINT")
    con.execute("ATTACH $path AS _fresh", {"path": str(target)})
    try:
        con.execute(f'COPY FROM DATABASE "{db}" TO _fresh')
    finally:
        con.execute("DETACH _fresh")
    return target.stat().st_size
