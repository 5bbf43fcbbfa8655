"""Every read of the DuckDB file: series for forecasts, backtests and power sizing, the finished
tasks alpha learning reads, the sections of the benefit report, and ad-hoc SQL. Each function takes
an open connection (``DuckStore.con``, read-only) and returns columns or rows; callers own the file.

The benefit report's sections (``--show-sql`` prints them):
1. outcomes by task type: tasks placed and finished, mean completion time (the finished event's
   duration, else finished - started), mean queueing time (first placement - submission), mean
   achieved throughput;
2. network-aware against the compute-only counterfactual recorded with every placement (the node
   alpha = 1 would have chosen, scored at the task's own alpha): how often the choice differed, and
   the composite and network score of the chosen node against the counterfactual's;
3. cluster utilisation: accelerator-seconds used by tasks (started to finished, or to the last
   event for tasks still running) over the cards reported on compute.nodes times the span observed.
"""

from __future__ import annotations

import numpy as np

STATS = ("mean", "p50", "p95", "p99", "min", "max")


def load_series(con, metric: str, stat: str, step_s: float, days: float | None = None, *, src: str | None = None,
                dst: str | None = None, since: float | None = None
                ) -> tuple[list[tuple[str, str]], np.ndarray, float]:
    """(series as (src, dst), values[S, T] with NaN gaps, time of the first step) from the windows
    table: the statistic averaged per step of ``step_s`` seconds. Paths only unless ``dst`` is given
    ('' for node-local series); ``src`` picks one source; ``since`` a start time; ``days`` the last
    days before the newest window of the metric. Columns come out of DuckDB as arrays and land in the
    matrix by fancy indexing (no Python loop over rows)."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}")
    params: dict = {"step": step_s, "metric": metric}
    where = [f"metric = $metric AND {stat} IS NOT NULL", "dst <> ''" if dst is None else "dst = $dst"]
    for name, value, clause in (("src", src, "src = $src"), ("dst", dst, None), ("since", since, "window_start >= $since"),
                                ("days", days, "window_start >= (SELECT max(window_start) FROM windows "
                                               "WHERE metric = $metric) - $days * 86400")):
        if value is not None:
            params[name] = value
            if clause:
                where.append(clause)
    cols = con.execute(
        f"""SELECT dense_rank() OVER (ORDER BY src, dst) - 1 AS path, src, dst,
                   floor(window_start / $step)::BIGINT AS step, avg({stat}) AS v
            FROM windows WHERE {' AND '.join(where)}
            GROUP BY src, dst, step ORDER BY path, step""",
        params,
    ).fetchnumpy()
    if len(cols["path"]) == 0:
        return [], np.zeros((0, 0)), 0.0
    path = np.asarray(cols["path"], dtype=np.int64)
    step = np.asarray(cols["step"], dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, path[1:] != path[:-1]])
    paths = [(str(cols["src"][i]), str(cols["dst"][i])) for i in starts]
    first, last = int(step.min()), int(step.max())
    values = np.full((len(paths), last - first + 1), np.nan)
    values[path, step - first] = np.asarray(cols["v"], dtype=np.float64)
    return paths, values, float(first * step_s)


def recent_windows(con, metric: str, stat: str, last: int, days: float = 1.0, step_s: float = 0.0
                   ) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray]:
    """Every path's ``last`` newest windows of ``metric`` within ``days`` of the metric's newest window:
    (paths, window ends float[P, last], values float[P, last]), oldest first, NaN in front where a
    path has fewer; with ``step_s`` > 0, the last window of each step of that many seconds (the
    degradation detector's steps) instead of every window. What the detector remembers, read back
    after a restart."""
    if stat not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}")
    one_per_step = "QUALIFY row_number() OVER (PARTITION BY src, dst, floor(e / $step) ORDER BY e DESC) = 1" \
        if step_s > 0 else ""
    cols = con.execute(
        f"""WITH w AS (
                SELECT src, dst, window_end AS e, {stat} AS v FROM windows
                WHERE metric = $metric AND dst <> '' AND {stat} IS NOT NULL
                  AND window_end >= (SELECT max(window_end) FROM windows WHERE metric = $metric) - $days * 86400
                {one_per_step})
            SELECT dense_rank() OVER (ORDER BY src, dst) - 1 AS path, src, dst, e, v,
                   row_number() OVER (PARTITION BY src, dst ORDER BY e DESC) AS back
            FROM w QUALIFY back <= $last ORDER BY path, e""",
        {"metric": metric, "days": days, "last": last} | ({"step": step_s} if step_s > 0 else {}),
    ).fetchnumpy()
    n = len(cols["path"])
    path = np.asarray(cols["path"], dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, path[1:] != path[:-1]]) if n else np.zeros(0, np.int64)
    paths = [(str(cols["src"][i]), str(cols["dst"][i])) for i in starts]
    ends, values = np.full((len(paths), last), np.nan), np.full((len(paths), last), np.nan)
    if n:
        slot = last - np.asarray(cols["back"], dtype=np.int64)  # the newest in the last column
        ends[path, slot] = np.asarray(cols["e"], dtype=np.float64)
        values[path, slot] = np.asarray(cols["v"], dtype=np.float64)
    return paths, ends, values


def latest_window_start(con, src: str, dst: str, metric: str) -> float | None:
    """When the newest window of one series started (None: no such series)."""
    return con.execute("SELECT max(window_start) FROM windows WHERE src = ? AND dst = ? AND metric = ?",
                       [src, dst, metric]).fetchone()[0]


FINISHED_SQL = """
WITH placed AS (  -- the first placement of each task: the scores it was placed with
    SELECT task_id, arg_min(task_type, decided_at) AS task_type, arg_min(compute_score, decided_at) AS compute,
           arg_min(network_score, decided_at) AS network, arg_min(alpha, decided_at) AS alpha
    FROM decisions WHERE status = 'placed' AND task_type IS NOT NULL GROUP BY task_id),
done AS (
    SELECT task_id, max(throughput) AS achieved FROM task_events
    WHERE event = 'finished' AND throughput IS NOT NULL GROUP BY task_id)
SELECT p.task_type, p.compute, p.network, d.achieved
FROM placed p JOIN done d USING (task_id)
WHERE p.alpha < 1 AND p.compute IS NOT NULL AND p.network IS NOT NULL  -- alpha 1 records no network score
ORDER BY p.task_type, p.task_id
"""


def finished_tasks(con) -> list[tuple]:
    """(task_type, compute, network, achieved throughput) of every finished task, by type."""
    return con.execute(FINISHED_SQL).fetchall()


OUTCOMES_SQL = """
WITH placed AS (
    SELECT task_id, any_value(task_type) AS task_type, min(decided_at) AS placed_at,
           min(submitted_at) AS submitted_at
    FROM decisions WHERE status = 'placed' GROUP BY task_id),
started AS (SELECT task_id, min(event_at) AS started_at FROM task_events WHERE event = 'started' GROUP BY task_id),
finished AS (
    SELECT task_id, max(event_at) AS finished_at, max(duration_s) AS duration_s, avg(throughput) AS throughput
    FROM task_events WHERE event = 'finished' GROUP BY task_id)
SELECT coalesce(p.task_type, '?') AS task_type,
       count(*) AS placed,
       count(f.task_id) AS finished,
       round(avg(coalesce(f.duration_s, f.finished_at - s.started_at)), 1) AS mean_completion_s,
       round(avg(greatest(p.placed_at - p.submitted_at, 0)), 2) AS mean_queueing_s,
       round(avg(f.throughput), 1) AS mean_throughput
FROM placed p LEFT JOIN started s USING (task_id) LEFT JOIN finished f USING (task_id)
GROUP BY ALL ORDER BY task_type
"""

COUNTERFACTUAL_SQL = """
WITH first AS (  -- each task's first placement, where the counterfactual was recorded
    SELECT task_id, arg_min(task_type, decided_at) AS task_type, arg_min(nodes, decided_at) AS nodes,
           arg_min(compute_only_nodes, decided_at) AS compute_only_nodes,
           arg_min(composite, decided_at) AS composite, arg_min(network_score, decided_at) AS network_score,
           arg_min(compute_only_composite, decided_at) AS co_composite,
           arg_min(compute_only_network_score, decided_at) AS co_network_score,
           arg_min(alpha, decided_at) AS alpha
    FROM decisions WHERE status = 'placed' GROUP BY task_id)
SELECT coalesce(task_type, '?') AS task_type,
       count(*) AS placed,
       count(*) FILTER (WHERE list_sort(nodes) <> list_sort(compute_only_nodes)) AS differed,
       round(avg(alpha), 2) AS mean_alpha,
       round(avg(composite), 1) AS score_composite_chosen,
       round(avg(co_composite), 1) AS score_composite_compute_only,
       round(avg(network_score) FILTER (WHERE alpha < 1), 1) AS score_network_chosen,
       round(avg(co_network_score) FILTER (WHERE alpha < 1), 1) AS score_network_compute_only
FROM first GROUP BY ALL ORDER BY task_type
"""

REPLAY_SQL = """
WITH latest AS (SELECT run_id, trace FROM sim_runs ORDER BY created_at DESC LIMIT 1)
SELECT c.run_id, l.trace, c.policy, c.against, c.class,
       round(100 * c.jct_change, 1) AS jct_change_pct,
       round(100 * c.ci_low, 1) AS ci_low_pct, round(100 * c.ci_high, 1) AS ci_high_pct, c.interval_over
FROM sim_changes c JOIN latest l USING (run_id)
WHERE c.policy IN ('ours', 'ours-static')
ORDER BY c.against, c.policy, c.class
"""

HEADLINE_SQL = """
WITH latest AS (SELECT run_id, trace FROM sim_runs ORDER BY created_at DESC LIMIT 1)
SELECT h.policy, h.against, h.kind, h.metric, h.seeds, h.jobs,
       round(100 * h.change, 1) AS change_pct, round(100 * h.ci_low, 1) AS ci_low_pct,
       round(100 * h.ci_high, 1) AS ci_high_pct, round(h.mean_policy_s) AS mean_s, round(h.mean_against_s) AS against_mean_s,
       round(h.p50_policy_s) AS p50_s, round(h.p50_against_s) AS against_p50_s,
       round(h.paired_median, 3) AS paired_median, round(100 * h.top10_share) AS top10_share_pct
FROM sim_headline h JOIN latest l USING (run_id)
WHERE h.policy = 'ours' AND h.metric IN ('jct', 'wait', 'run')
ORDER BY h.against DESC, h.kind, h.metric
"""

UTILISATION_SQL = """
WITH runs AS (
    SELECT s.task_id, s.event_at AS start_at,
           coalesce(min(f.event_at), (SELECT max(event_at) FROM task_events)) AS stop_at
    FROM task_events s LEFT JOIN task_events f
         ON f.task_id = s.task_id AND f.event IN ('finished', 'failed') AND f.event_at >= s.event_at
    WHERE s.event = 'started' GROUP BY s.task_id, s.event_at),
size AS (SELECT task_id, max(coalesce(cards, 0) * coalesce(peers, 1)) AS cards
         FROM decisions WHERE status = 'placed' GROUP BY task_id),
capacity AS (SELECT sum(cards) AS cards
             FROM (SELECT node, arg_max(cards, ts) AS cards FROM compute_reports GROUP BY node)),
used AS (SELECT sum((r.stop_at - r.start_at) * z.cards) AS card_s, min(r.start_at) AS t0, max(r.stop_at) AS t1
         FROM runs r JOIN size z USING (task_id))
SELECT (SELECT cards FROM capacity) AS cluster_cards,
       round(t1 - t0, 1) AS span_s,
       round(card_s, 1) AS used_card_s,
       round(100 * card_s / nullif((SELECT cards FROM capacity) * (t1 - t0), 0), 2) AS utilisation_pct
FROM used
"""

BENEFIT_LIVE = (
    ("Outcomes by task type", OUTCOMES_SQL),
    ("Network-aware vs compute-only, live: scores (0-100) of the chosen node and of the node alpha = 1 "
     "would have chosen, not times", COUNTERFACTUAL_SQL),
    ("Cluster utilisation (accelerators)", UTILISATION_SQL),
)
BENEFIT_REPLAY = (  # read from the replay's own file (CNSCHED_REPLAY_DUCKDB_PATH)
    ("Measured by the latest replay (cnsched simulate): mean JCT change, with its 95 % interval", REPLAY_SQL),
    ("The latest replay's headline: ours against each baseline per job kind (gang, data, other, all), completion "
     "time, wait and run apart; change of the mean per seed with its 95 % t-interval over seeds, paired per-job "
     "median (a ratio; for wait a difference in s), the ten largest differences' share", HEADLINE_SQL),
)
BENEFIT = BENEFIT_LIVE + BENEFIT_REPLAY


def run_sections(con, sections=BENEFIT) -> list[dict]:
    """[{title, sql, columns, rows}] for each section."""
    out = []
    for title, sql in sections:
        cur = con.execute(sql)
        out.append({"title": title, "sql": sql.strip(), "columns": [d[0] for d in cur.description],
                    "rows": cur.fetchall()})
    return out


INCIDENTS_SQL = """
SELECT node, coalesce(any_value(scope), 'node') AS scope,  -- a node, a whole site (site/...), a path (path/...)
       strftime(to_timestamp(detected_at) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') AS detected_utc,
       CASE WHEN bool_or(status = 'recovered') THEN 'recovered' WHEN bool_or(status = 'mitigated') THEN 'mitigated'
            ELSE 'open' END AS status,
       arg_max(cause, coalesce(recovered_at, mitigated_at, located_at, detected_at)) AS cause,
       round(min(located_at) - detected_at, 1) AS locate_s,
       round(min(mitigated_at) - detected_at, 1) AS mitigate_s,  -- its tasks elsewhere, queued or ended
       round(max(recovered_at) - detected_at, 1) AS recover_s,  -- the node, site or path back (or removed)
       max(len(tasks)) AS tasks, round(max(work_lost_s), 1) AS work_lost_s
FROM incidents GROUP BY node, detected_at ORDER BY detected_at, node
"""
INCIDENTS = (("Incidents (node failures: detected, located, tasks elsewhere, node back)", INCIDENTS_SQL),)


TEAMS_CTE = """
WITH d AS (
    SELECT task_id, decided_at, status, coalesce(doc->>'team', '') AS team, cards * peers AS cards, submitted_at,
           TRY_CAST(doc->>'work_lost_s' AS DOUBLE) AS work_lost_s
    FROM decisions),
tasks AS (
    SELECT task_id, any_value(team) AS team, any_value(cards) AS cards, any_value(submitted_at) AS submitted_at,
           min(decided_at) FILTER (WHERE status = 'placed') AS placed_at
    FROM d GROUP BY task_id),
pre AS (SELECT team, count(*) AS preemptions, sum(work_lost_s * cards) / 3600 AS lost_card_h
        FROM d WHERE status = 'preempted' GROUP BY team),
used AS (SELECT t.team, sum(e.duration_s * t.cards) / 3600 AS card_h
         FROM task_events e JOIN tasks t USING (task_id) WHERE e.event = 'finished' GROUP BY t.team),
latest AS (SELECT doc FROM quota_changes ORDER BY changed_at DESC LIMIT 1),
g AS (SELECT q->>'team' AS team, sum(CAST(q->>'guaranteed_cards' AS DOUBLE)) FILTER (WHERE q->>'accel_class' IS NULL
             OR q->>'accel_class' = '*') AS guaranteed
      FROM (SELECT unnest(json_extract(doc, '$.quotas[*]')) AS q FROM latest) GROUP BY 1),
per_team AS (
    SELECT coalesce(nullif(tasks.team, ''), 'default') AS team, count(*) AS tasks, count(placed_at) AS placed,
           round(avg(placed_at - submitted_at), 1) AS wait_mean_s,
           round(quantile_cont(placed_at - submitted_at, 0.95), 1) AS wait_p95_s,
           coalesce(max(pre.preemptions), 0) AS preemptions, round(coalesce(max(pre.lost_card_h), 0), 3) AS lost_card_h,
           round(coalesce(max(used.card_h), 0), 3) AS card_h, max(g.guaranteed) AS guaranteed_cards
    FROM tasks LEFT JOIN pre USING (team) LEFT JOIN used USING (team)
         LEFT JOIN g ON g.team = coalesce(nullif(tasks.team, ''), 'default')
    GROUP BY 1)
"""
TEAMS_SQL = TEAMS_CTE + "SELECT * FROM per_team ORDER BY team"
FAIRNESS_SQL = TEAMS_CTE + """
SELECT count(*) AS teams,
       round(power(sum(x), 2) / nullif(count(*) * sum(x * x), 0), 4) AS jain_index,
       any_value(basis) AS basis
FROM (SELECT CASE WHEN guaranteed_cards > 0 THEN card_h / guaranteed_cards ELSE card_h END AS x,
             CASE WHEN guaranteed_cards > 0 THEN 'card-hours per guaranteed card' ELSE 'card-hours' END AS basis
      FROM per_team WHERE placed > 0)
"""
QUOTAS = (("Teams: tasks, waits (submission to first placement), preemptions and the work they lost, card-hours "
           "of finished tasks, guarantee of the latest quota set", TEAMS_SQL),
          ("Fairness: Jain's index over teams (1: every team got the same per guaranteed card)", FAIRNESS_SQL))


def run_query(con, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of any query; DuckDB's own error when it fails."""
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description or []]
    return cols, (cur.fetchall() if cols else [])


def service_load(con, task_ids: list[str], since: float) -> list[tuple]:
    """[(task_id, event_at, request_rate)] of the services' stored ``load`` events since then, oldest
    first (a restarted scheduler's pre-scaling history)."""
    if not task_ids:
        return []
    return con.execute("""
        SELECT task_id, event_at, request_rate FROM task_events
        WHERE event = 'load' AND request_rate IS NOT NULL AND event_at >= ? AND list_contains(?, task_id)
        ORDER BY task_id, event_at""", [since, task_ids]).fetchall()
