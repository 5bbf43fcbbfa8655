"""`cnsched report cost`: what the cluster's work cost, from the DuckDB audit.

A task's cost is what it held while it ran: every run segment — from a ``started`` event to the
task's next ``started`` (a move or a restart), ``finished``, ``failed``, or an operator's ``cancel``
(or the runner's ``stopped``, whichever comes first) — on the nodes that event names, each with ``cards`` accelerators (the placement's cards per worker):

- cards: cards x hours x the price of a card-hour of the node's class (``CNSCHED_CARD_PRICES``,
  ``*`` for classes not listed);
- energy: the node's full-load draw (``power_kw`` of its report in force when the segment started)
  x the task's share of its cards x hours, at the node's ``energy_price_per_mwh`` then (else
  ``CNSCHED_ENERGY_PRICE_PER_MWH``). No task meters its own draw, so this is the modelled draw.

Transfer: every placement loads its data, model and image (the decision's ``load_gb``, all workers),
every move carries the state and loads again (the reschedule's ``transfer_gb``), priced per GB at
``CNSCHED_TRANSFER_PRICE_PER_GB`` (0 by default: the volume is shown, its cost when a price is set),
in the month it happened.

Measured against modelled: where a site sends its facility power (``power_mw`` windows), its energy
per month is set beside the modelled energy of its tasks and idle cards; the ratio is what the model
does not see (cooling, conversion losses, nodes that report no power).

Idle draw belongs to no task: a node draws ``CNSCHED_IDLE_POWER_SHARE`` of its full load on cards
nobody holds. It is reported per site and month, from consecutive compute reports (the free cards
of one report held until the next, at most ``MAX_GAP_S``). Delivered compute is what ``finished``
events report (throughput x duration, in the task's unit); cost per unit is cost over it. A month is
the UTC month a segment started in.
"""

from __future__ import annotations

MAX_GAP_S = 3600.0  # a report older than this says nothing about the idle draw since
# a compute report's site (its zone, else its region, else the node) and power figures
SITE = "coalesce(nullif(doc->>'zone', ''), nullif(region, ''), node)"
POWER = ("TRY_CAST(doc->>'power_kw' AS DOUBLE) AS power_kw, "
         "TRY_CAST(doc->>'energy_price_per_mwh' AS DOUBLE) AS price_mwh")

SEGMENTS_CTE = """
WITH ev AS (
    SELECT task_id, event, event_at, nodes,
           lead(event_at) OVER (PARTITION BY task_id ORDER BY event_at, event) AS next_at
    FROM task_events WHERE event IN ('started', 'finished', 'failed', 'cancel', 'stopped')),
placed AS (
    SELECT task_id, any_value(task_type) AS task_type, coalesce(nullif(any_value(doc->>'team'), ''), 'default') AS team,
           max(coalesce(cards, 0)) AS cards
    FROM decisions WHERE status = 'placed' GROUP BY task_id),
seg AS (
    SELECT e.task_id, e.event_at AS start_at, e.next_at - e.event_at AS seconds, unnest(e.nodes) AS node
    FROM ev e WHERE e.event = 'started' AND e.next_at IS NOT NULL),
reports AS (
    SELECT node, ts, coalesce(accel_class, '') AS accel_class, greatest(cards, 0) AS node_cards,
           {power}, {site} AS site, free_cards
    FROM compute_reports),
prices AS (SELECT * FROM (VALUES {prices}) AS p(accel_class, card_hour)),
costed AS (
    SELECT s.task_id, p.task_type, p.team, s.node, r.site, r.accel_class, s.start_at,
           strftime(to_timestamp(s.start_at) AT TIME ZONE 'UTC', '%Y-%m') AS month,
           p.cards * s.seconds / 3600 AS card_h,
           coalesce(pr.card_hour, (SELECT card_hour FROM prices WHERE accel_class = '*')) * p.cards * s.seconds / 3600
               AS card_cost,
           coalesce(r.power_kw, 0) * p.cards / nullif(r.node_cards, 0) * s.seconds / 3600 AS kwh,
           kwh / 1000 * coalesce(r.price_mwh, {energy_price}) AS energy_cost
    FROM seg s JOIN placed p USING (task_id)
    ASOF LEFT JOIN reports r ON r.node = s.node AND s.start_at >= r.ts
    LEFT JOIN prices pr ON pr.accel_class = r.accel_class),
transfers AS (
    SELECT t.task_id, p.team, p.task_type, strftime(to_timestamp(t.at) AT TIME ZONE 'UTC', '%Y-%m') AS month,
           t.gb, t.gb * {transfer_price} AS transfer_cost
    FROM (SELECT task_id, decided_at AS at, coalesce(TRY_CAST(doc->>'load_gb' AS DOUBLE), 0) AS gb
          FROM decisions WHERE status = 'placed'
          UNION ALL SELECT task_id, moved_at, coalesce(transfer_gb, 0) FROM reschedules) t
    JOIN placed p USING (task_id)),
delivered AS (
    SELECT task_id, sum(throughput * duration_s) AS work, any_value(unit) AS unit
    FROM task_events WHERE event = 'finished' AND throughput IS NOT NULL AND duration_s IS NOT NULL
    GROUP BY task_id)
"""

BY_TASK_SQL = SEGMENTS_CTE + """
, moved AS (SELECT task_id, sum(gb) AS gb, sum(transfer_cost) AS transfer_cost FROM transfers GROUP BY task_id),
per_task AS (
    SELECT task_id, any_value(team) AS team, any_value(task_type) AS task_type, min(month) AS month,
           string_agg(DISTINCT node, ',' ORDER BY node) AS nodes, sum(card_h) AS card_h, sum(kwh) AS kwh,
           sum(card_cost) AS card_cost, sum(energy_cost) AS energy_cost
    FROM costed GROUP BY task_id)
SELECT task_id, team, task_type, month, nodes, round(card_h, 4) AS card_h, round(kwh, 3) AS kwh,
       round(coalesce(m.gb, 0), 3) AS transfer_gb, round(card_cost, 4) AS card_cost,
       round(energy_cost, 4) AS energy_cost, round(coalesce(m.transfer_cost, 0), 4) AS transfer_cost,
       round(card_cost + energy_cost + coalesce(m.transfer_cost, 0), 4) AS cost,
       round((card_cost + energy_cost + coalesce(m.transfer_cost, 0)) / nullif(d.work, 0) * 1000, 6)
           AS cost_per_1k_units, d.unit
FROM per_task LEFT JOIN moved m USING (task_id) LEFT JOIN delivered d USING (task_id)
ORDER BY cost DESC, task_id
"""

BY_MONTH_SQL = SEGMENTS_CTE + """
, m AS (
    SELECT {key} AS {name}, month, sum(card_h) AS card_h, sum(kwh) AS kwh, sum(gb) AS transfer_gb,
           sum(cost) AS cost
    FROM (SELECT team, task_type, month, card_h, kwh, 0.0 AS gb, card_cost + energy_cost AS cost FROM costed
          UNION ALL SELECT team, task_type, month, 0.0, 0.0, gb, transfer_cost FROM transfers)
    GROUP BY ALL)
SELECT {name}, month, round(card_h, 3) AS card_h, round(kwh, 2) AS kwh, round(transfer_gb, 2) AS transfer_gb,
       round(cost, 2) AS cost,
       round(100 * (cost / nullif(lag(cost) OVER (PARTITION BY {name} ORDER BY month), 0) - 1), 1)
           AS change_vs_previous_month_pct
FROM m ORDER BY {name}, month
"""

IDLE_CTE = """
r AS (
    SELECT node, ts, {site} AS site, greatest(cards, 0) AS cards, coalesce(free_cards, 0) AS free_cards, {power},
           lead(ts) OVER (PARTITION BY node ORDER BY ts) AS next_ts
    FROM compute_reports),
idle AS (
    SELECT site, strftime(to_timestamp(ts) AT TIME ZONE 'UTC', '%Y-%m') AS month, price_mwh,
           power_kw * {idle_share} * free_cards / nullif(cards, 0) * least(next_ts - ts, {max_gap}) / 3600 AS kwh
    FROM r WHERE next_ts IS NOT NULL AND power_kw IS NOT NULL AND cards > 0)
"""

IDLE_SQL = "WITH " + IDLE_CTE + """
SELECT site, month, round(sum(kwh), 3) AS idle_kwh,
       round(sum(kwh / 1000 * coalesce(price_mwh, {energy_price})), 4) AS idle_energy_cost
FROM idle GROUP BY ALL ORDER BY site, month
"""

# a site's measured draw: its power_mw windows (src = site, dst empty), each counted until the next
# window starts (hopping windows overlap) or its own end, whichever is sooner
MEASURED_SQL = SEGMENTS_CTE + ", " + IDLE_CTE + """,
modelled AS (
    SELECT site, month, sum(kwh) AS kwh
    FROM (SELECT site, month, kwh FROM costed UNION ALL SELECT site, month, kwh FROM idle) GROUP BY ALL),
w AS (
    SELECT src AS site, window_start, mean,
           least(window_end, lead(window_start) OVER (PARTITION BY src ORDER BY window_start)) - window_start AS s
    FROM windows WHERE metric = 'power_mw' AND dst = '' AND mean IS NOT NULL),
measured AS (
    SELECT site, strftime(to_timestamp(window_start) AT TIME ZONE 'UTC', '%Y-%m') AS month,
           sum(mean * s) / 3600 * 1000 AS kwh
    FROM w GROUP BY ALL)
SELECT coalesce(m.site, x.site) AS site, coalesce(m.month, x.month) AS month, round(m.kwh, 3) AS modelled_kwh,
       round(x.kwh, 3) AS measured_kwh, round(x.kwh / nullif(m.kwh, 0), 3) AS measured_over_modelled
FROM modelled m FULL JOIN measured x ON m.site = x.site AND m.month = x.month
ORDER BY 1, 2
"""


_REPORT = {"site": SITE, "power": POWER}


def _prices_values(card_prices: dict[str, float]) -> str:
    """The VALUES rows of the price table: class names as SQL string literals (quotes doubled),
    prices as floats; ``*`` always present."""
    prices = {"*": 0.0, **card_prices}
    return ", ".join(f"('{k.replace(chr(39), chr(39) * 2)}', {float(v)!r})" for k, v in sorted(prices.items()))


def cost_sections(card_prices: dict[str, float], energy_price_mwh: float, idle_share: float,
                  transfer_price_gb: float = 0.0) -> tuple:
    """(title, sql) sections of the cost report, for ``run_sections``."""
    fmt = {"prices": _prices_values(card_prices), "energy_price": repr(float(energy_price_mwh)),
           "transfer_price": repr(float(transfer_price_gb)), **_REPORT}
    seg = SEGMENTS_CTE.format(**fmt)
    idle = {"idle_share": repr(float(idle_share)), "max_gap": repr(MAX_GAP_S), **fmt}
    by = BY_MONTH_SQL.replace(SEGMENTS_CTE, seg)
    return (
        ("Cost by task: card-hours x the class price, modelled energy x the node's price, data moved x the "
         "transfer price; per 1,000 units of the work it reported", BY_TASK_SQL.replace(SEGMENTS_CTE, seg)),
        ("Cost by team and month, with the change against the team's previous month",
         by.format(key="team", name="team")),
        ("Cost by task type and month", by.format(key="coalesce(task_type, '?')", name="task_type")),
        (f"Idle draw by site and month ({idle_share:g} of full load on free cards; no task pays it)",
         IDLE_SQL.format(**idle)),
        ("Energy by site and month: modelled (tasks' and idle draw) beside measured (the site's power_mw "
         "windows); their ratio is what the model misses (cooling, power conversion, unreported nodes)",
         MEASURED_SQL.format(**idle)),
    )


WEEKLY_SQL = SEGMENTS_CTE + """
, first_seg AS (
    SELECT task_id, arg_min(accel_class, start_at) AS accel_class, arg_min(site, start_at) AS site,
           min(start_at) AS start_at, sum(card_h) AS card_h
    FROM costed GROUP BY task_id),
waits AS (
    SELECT task_id, min(decided_at) FILTER (WHERE status = 'placed') - min(submitted_at) AS wait_s,
           max(coalesce(cards, 0) * coalesce(peers, 1)) AS job_cards
    FROM decisions GROUP BY task_id)
SELECT f.accel_class, f.site,
       epoch(date_trunc('week', to_timestamp(f.start_at) AT TIME ZONE 'UTC')) AS week,
       sum(f.card_h) AS card_h, count(*) AS jobs, avg(w.job_cards) AS cards_per_job,
       quantile_cont(greatest(w.wait_s, 0), 0.95) AS wait_p95_s
FROM first_seg f LEFT JOIN waits w USING (task_id)
GROUP BY ALL ORDER BY f.accel_class, f.site, week
"""

CARDS_SQL = """
SELECT coalesce(accel_class, '') AS accel_class, {site} AS site, sum(cards) AS cards
FROM (SELECT node, arg_max(accel_class, ts) AS accel_class, arg_max(region, ts) AS region,
             arg_max(doc, ts) AS doc, arg_max(cards, ts) AS cards FROM compute_reports GROUP BY node)
GROUP BY ALL ORDER BY 1, 2
"""


def weekly_demand(con) -> tuple[list[tuple], dict[tuple[str, str], int]]:
    """([(class, site, week start, card-hours, jobs, cards per job, p95 wait s)], {(class, site): cards})."""
    weekly = con.execute(WEEKLY_SQL.format(prices="('*', 0.0)", energy_price="0.0", transfer_price="0.0",
                                           **_REPORT)).fetchall()
    cards = {(c, s): int(n or 0) for c, s, n in con.execute(CARDS_SQL.format(**_REPORT)).fetchall()}
    return weekly, cards
