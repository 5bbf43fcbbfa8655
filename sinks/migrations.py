"""The DuckDB file's schema as numbered migrations: version N's SQL runs once, in order, and
``schema_version`` records it (sinks/duckdb_store.py applies them). A schema change is a new number,
never an edit of one already released."""

from __future__ import annotations

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE windows (
        src VARCHAR NOT NULL, dst VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        window_start DOUBLE NOT NULL, window_end DOUBLE NOT NULL,
        count BIGINT NOT NULL, kept BIGINT NOT NULL, outliers BIGINT NOT NULL, lost BIGINT NOT NULL,
        mean DOUBLE, p50 DOUBLE, p95 DOUBLE, p99 DOUBLE, min DOUBLE, max DOUBLE,
        PRIMARY KEY (src, dst, metric, window_start, window_end)
    );
    """,
    2: """
    CREATE TABLE decisions (
        task_id VARCHAR NOT NULL, decided_at DOUBLE NOT NULL, status VARCHAR NOT NULL, nodes VARCHAR[],
        alpha DOUBLE, network_profile VARCHAR, composite DOUBLE, compute_score DOUBLE, network_score DOUBLE,
        compute_only_nodes VARCHAR[], state_version BIGINT, rejected_counts VARCHAR, doc VARCHAR,
        PRIMARY KEY (task_id, decided_at)
    );
    CREATE TABLE decision_candidates (
        task_id VARCHAR NOT NULL, decided_at DOUBLE NOT NULL, rank INTEGER NOT NULL, node VARCHAR NOT NULL,
        compute_score DOUBLE, network_score DOUBLE, alpha DOUBLE, composite DOUBLE,
        PRIMARY KEY (task_id, decided_at, rank)
    );
    CREATE TABLE reschedules (
        task_id VARCHAR NOT NULL, moved_at DOUBLE NOT NULL, from_nodes VARCHAR[], to_nodes VARCHAR[],
        trigger VARCHAR, expected_gain_s DOUBLE, migration_cost_s DOUBLE, before_composite DOUBLE,
        after_composite DOUBLE, state_version BIGINT,
        PRIMARY KEY (task_id, moved_at)
    );
    """,
    3: """
    CREATE TABLE task_events (
        task_id VARCHAR NOT NULL, event VARCHAR NOT NULL, event_at DOUBLE NOT NULL, nodes VARCHAR[],
        duration_s DOUBLE, throughput DOUBLE, unit VARCHAR,
        PRIMARY KEY (task_id, event, event_at)
    );
    """,
    4: """
    ALTER TABLE decisions ADD COLUMN task_type VARCHAR;
    ALTER TABLE decisions ADD COLUMN submitted_at DOUBLE;
    ALTER TABLE decisions ADD COLUMN cards INTEGER;
    ALTER TABLE decisions ADD COLUMN peers INTEGER;
    ALTER TABLE decisions ADD COLUMN compute_only_composite DOUBLE;
    ALTER TABLE decisions ADD COLUMN compute_only_network_score DOUBLE;
    CREATE TABLE compute_reports (
        node VARCHAR NOT NULL, ts DOUBLE NOT NULL, status VARCHAR, region VARCHAR, accel_class VARCHAR,
        cards INTEGER, free_cards INTEGER, availability DOUBLE, queue_delay_s DOUBLE, doc VARCHAR,
        PRIMARY KEY (node, ts)
    );
    """,
    5: """
    CREATE VIEW task_audit AS
    WITH first AS (
        SELECT task_id, min(decided_at) FILTER (WHERE status = 'placed') AS placed_at,
               min(decided_at) AS first_decided_at, count(*) AS decisions
        FROM decisions GROUP BY task_id),
    ev AS (
        SELECT task_id, min(event_at) FILTER (WHERE event = 'started') AS started_at,
               max(event_at) FILTER (WHERE event IN ('finished', 'failed')) AS ended_at,
               arg_max(event, event_at) AS last_event, max(duration_s) AS duration_s,
               max(throughput) AS throughput
        FROM task_events GROUP BY task_id),
    moves AS (SELECT task_id, count(*) AS migrations FROM reschedules GROUP BY task_id)
    SELECT d.task_id, d.task_type, d.submitted_at, f.placed_at, d.nodes, d.alpha, d.network_profile,
           d.compute_score, d.network_score, d.composite, d.compute_only_nodes, d.compute_only_composite,
           d.state_version, f.decisions, coalesce(m.migrations, 0) AS migrations,
           ev.started_at, ev.ended_at, ev.last_event, ev.duration_s, ev.throughput
    FROM first f
    JOIN decisions d ON d.task_id = f.task_id AND d.decided_at = coalesce(f.placed_at, f.first_decided_at)
    LEFT JOIN ev ON ev.task_id = f.task_id
    LEFT JOIN moves m ON m.task_id = f.task_id;
    """,
    6: """
    CREATE TABLE incidents (
        node VARCHAR NOT NULL, detected_at DOUBLE NOT NULL, status VARCHAR NOT NULL, cause VARCHAR,
        located_at DOUBLE, recovered_at DOUBLE, tasks VARCHAR[], work_lost_s DOUBLE,
        PRIMARY KEY (node, detected_at, status)
    );
    """,
    7: """
    CREATE TABLE sim_runs (
        run_id VARCHAR NOT NULL, created_at DOUBLE NOT NULL, trace VARCHAR, network VARCHAR,
        policy VARCHAR NOT NULL, class VARCHAR NOT NULL, jobs BIGINT, jct_mean_s DOUBLE, jct_p50_s DOUBLE,
        jct_p95_s DOUBLE, jct_p99_s DOUBLE, wait_mean_s DOUBLE, makespan_s DOUBLE, card_utilisation DOUBLE,
        migrations BIGINT, migration_cost_s DOUBLE, restarts BIGINT, failed BIGINT, unschedulable BIGINT,
        config VARCHAR, PRIMARY KEY (run_id, policy, class)
    );
    CREATE TABLE sim_changes (
        run_id VARCHAR NOT NULL, policy VARCHAR NOT NULL, against VARCHAR NOT NULL, class VARCHAR NOT NULL,
        jct_change DOUBLE, ci_low DOUBLE, ci_high DOUBLE, interval_over VARCHAR,
        PRIMARY KEY (run_id, policy, against, class)
    );
    CREATE TABLE sim_jobs (
        run_id VARCHAR NOT NULL, policy VARCHAR NOT NULL, seed BIGINT NOT NULL, job BIGINT NOT NULL,
        class VARCHAR, nodes INTEGER, cards INTEGER, submit_s DOUBLE, start_s DOUBLE, end_s DOUBLE, jct_s DOUBLE,
        wait_s DOUBLE, state VARCHAR, reason VARCHAR, migrations INTEGER, migration_s DOUBLE, restarts INTEGER,
        PRIMARY KEY (run_id, policy, seed, job)
    );
    """,
    8: """
    CREATE TABLE sink_rejects (
        topic VARCHAR NOT NULL, part INTEGER NOT NULL, "offset" BIGINT NOT NULL, reason VARCHAR NOT NULL,
        detail VARCHAR, original BLOB, rejected_at DOUBLE,
        PRIMARY KEY (topic, part, "offset")
    );
    """,
    9: """
    CREATE TABLE quota_changes (
        changed_at DOUBLE NOT NULL, teams VARCHAR[], entries INTEGER, doc VARCHAR,
        PRIMARY KEY (changed_at)
    );
    """,
    10: """
    ALTER TABLE task_events ADD COLUMN utilisation DOUBLE;
    ALTER TABLE task_events ADD COLUMN request_rate DOUBLE;
    ALTER TABLE task_events ADD COLUMN latency_ms DOUBLE;
    ALTER TABLE reschedules ADD COLUMN transfer_gb DOUBLE;
    """,
    11: """
    ALTER TABLE incidents ADD COLUMN mitigated_at DOUBLE;
    ALTER TABLE incidents ADD COLUMN resolution VARCHAR;
    ALTER TABLE incidents ADD COLUMN outcomes VARCHAR;
    CREATE TABLE node_maintenance (
        node VARCHAR NOT NULL, issued_at DOUBLE NOT NULL, action VARCHAR NOT NULL, deadline_s DOUBLE,
        requested_by VARCHAR, reason VARCHAR,
        PRIMARY KEY (node, issued_at, action)
    );
    """,
    12: """
    ALTER TABLE task_events ADD COLUMN requested_by VARCHAR;
    ALTER TABLE task_events ADD COLUMN reason VARCHAR;
    ALTER TABLE task_events ADD COLUMN priority INTEGER;
    """,
    13: """
    CREATE TABLE sim_headline (
        run_id VARCHAR NOT NULL, policy VARCHAR NOT NULL, against VARCHAR NOT NULL, kind VARCHAR NOT NULL,
        metric VARCHAR NOT NULL, change DOUBLE, ci_low DOUBLE, ci_high DOUBLE, seeds INTEGER, jobs BIGINT,
        mean_policy_s DOUBLE, mean_against_s DOUBLE, p50_policy_s DOUBLE, p50_against_s DOUBLE,
        p95_policy_s DOUBLE, p95_against_s DOUBLE, paired_median DOUBLE, top10_share DOUBLE,
        PRIMARY KEY (run_id, policy, against, kind, metric)
    );
    """,
    14: """
    ALTER TABLE sink_rejects ADD COLUMN original_size BIGINT;
    """,
    15: """
    ALTER TABLE task_events ADD COLUMN steps_done BIGINT;
    ALTER TABLE task_events ADD COLUMN steps_total BIGINT;
    """,
    16: """
    ALTER TABLE sim_jobs ADD COLUMN load_s DOUBLE;
    ALTER TABLE task_events ADD COLUMN load_s DOUBLE;
    """,
    17: """
    CREATE TABLE routes (
        service_id VARCHAR NOT NULL, version BIGINT NOT NULL, computed_at DOUBLE, trigger VARCHAR,
        origin VARCHAR NOT NULL, endpoint VARCHAR, replica VARCHAR NOT NULL, node VARCHAR, address VARCHAR,
        weight INTEGER, share DOUBLE, rtt_ms DOUBLE, warm BOOLEAN, origin_rate DOUBLE, expected_response_ms DOUBLE,
        request_rate DOUBLE, capacity_per_replica DOUBLE, rate_known BOOLEAN, overloaded BOOLEAN, compute_ms DOUBLE,
        PRIMARY KEY (service_id, version, origin, replica)
    );
    """,
    18: """
    ALTER TABLE incidents ADD COLUMN scope VARCHAR;
    ALTER TABLE incidents ADD COLUMN nodes VARCHAR[];
    """,
}
SCHEMA_VERSION = max(MIGRATIONS)
