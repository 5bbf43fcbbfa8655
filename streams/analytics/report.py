"""`cnsched report`: what the audit says, in SQL an analyst can rerun (``--show-sql`` prints it).

benefit — three tables:
1. outcomes by task type: tasks placed and finished, mean completion time (the finished event's
   duration, else finished - started), mean queueing time (first placement - submission), mean
   achieved throughput;
2. network-aware against the compute-only counterfactual recorded with every placement (the node
   alpha = 1 would have chosen, scored at the task's own alpha): how often the choice differed, and
   the composite and network score of the chosen node against the counterfactual's;
3. cluster utilisation: accelerator-seconds used by tasks (started to finished, or to the last
   event for tasks still running) over the cards reported on compute.nodes times the span observed.

alpha — per task type: the alpha learned from finished tasks (core.alpha), its rank correlation,
how many tasks, and whether it is in use as the type's default (CNSCHED_ALPHA_MIN_TASKS).
"""

from __future__ import annotations

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
       round(avg(composite), 1) AS composite_chosen,
       round(avg(co_composite), 1) AS composite_compute_only,
       round(avg(network_score) FILTER (WHERE alpha < 1), 1) AS network_chosen,
       round(avg(co_network_score) FILTER (WHERE alpha < 1), 1) AS network_compute_only
FROM first GROUP BY ALL ORDER BY task_type
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

BENEFIT = (
    ("Outcomes by task type", OUTCOMES_SQL),
    ("Network-aware vs compute-only (the node alpha = 1 would have chosen)", COUNTERFACTUAL_SQL),
    ("Cluster utilisation (accelerators)", UTILISATION_SQL),
)


ALPHA_COLUMNS = ("task_type", "tasks", "default_alpha", "learned_alpha", "spearman", "in_use")


def alpha_table(rows: list[dict]) -> str:
    """`cnsched report alpha` as text (rows of streams.analytics.history.learned_alphas)."""
    return table(list(ALPHA_COLUMNS), [tuple(r[c] for c in ALPHA_COLUMNS) for r in rows])


def run(con, sections=BENEFIT) -> list[dict]:
    """[{title, sql, columns, rows}] for each section."""
    out = []
    for title, sql in sections:
        cur = con.execute(sql)
        out.append({"title": title, "sql": sql.strip(), "columns": [d[0] for d in cur.description],
                    "rows": cur.fetchall()})
    return out


def render(sections: list[dict], show_sql: bool = False) -> str:
    lines = []
    for s in sections:
        lines.append(s["title"])
        if show_sql:
            lines += ["  " + x for x in s["sql"].splitlines()]
        lines += ["  " + x for x in table(s["columns"], s["rows"]).splitlines()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def table(columns: list[str], rows: list[tuple]) -> str:
    """A plain text table: text left, numbers right, '-' for missing."""
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.2f}" if abs(v) < 1e6 else f"{v:,.0f}"
        return str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) for i in range(len(columns))]

    def fmt(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric, strict=True))

    out = [fmt(columns), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells]
    if not rows:
        out.append("(no rows)")
    return "\n".join(x.rstrip() for x in out)
