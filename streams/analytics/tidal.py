"""Tidal lending's forecast: a team's demand (cards its tasks hold, per step) from the DuckDB audit —
placements (`decisions`) until the task finished, failed or was preempted — and the most it is
forecast to hold over the lead time: core.forecast's upper quantile, or what it held over the same
hours a day earlier where that was more (inference peaks come at the same hour every day)."""

from __future__ import annotations

import numpy as np

from core.forecast import forecast, min_history, seasonal_naive
from sinks.duckdb_store import DuckStore
from streams.analytics.forecasts import DAY_S, midnight_aligned

PLACEMENTS_SQL = """
WITH d AS (SELECT task_id, decided_at, status, cards * peers AS cards FROM decisions
           WHERE coalesce(doc->>'team', '') = $team AND decided_at >= $since),
stops AS (SELECT task_id, decided_at AS at FROM d WHERE status IN ('preempted', 'placed')
          UNION ALL SELECT task_id, event_at FROM task_events WHERE event IN ('finished', 'failed'))
SELECT p.decided_at AS start, (SELECT min(s.at) FROM stops s WHERE s.task_id = p.task_id AND s.at > p.decided_at) AS stop,
       p.cards
FROM d p WHERE p.status = 'placed' ORDER BY start
"""


def team_demand(con, team: str, step_s: float, since: float, until: float) -> tuple[np.ndarray, float]:
    """(cards held per step from ``since`` to ``until``, the first step's time) for ``team``."""
    rows = con.execute(PLACEMENTS_SQL, {"team": team, "since": since}).fetchall()
    first = np.floor(since / step_s) * step_s
    n = int(np.ceil((until - first) / step_s))
    delta = np.zeros(n + 1)
    for start, stop, cards in rows:
        a = int((start - first) // step_s)
        b = n if stop is None else min(int((stop - first) // step_s), n)
        if b > a:
            delta[a] += cards
            delta[b] -= cards
    return np.cumsum(delta)[:n], first


def tidal_forecasts(path, teams: list[str], step_s: float, lead_s: float, now: float, days: float = 7.0,
                    timeout_s: float = 5.0) -> dict[str, float]:
    """team -> the most cards it is forecast to hold within ``lead_s`` (teams with too little history
    are left out)."""
    horizon = max(1, int(round(lead_s / step_s)))
    out = {}
    with DuckStore.open(path, read_only=True, timeout_s=timeout_s) as store:
        series = {t: team_demand(store.con, t, step_s, now - days * DAY_S, now) for t in teams}
    for team, (values, first) in series.items():
        held = np.flatnonzero(values > 0)
        if held.size == 0 or values.size - held[0] < min_history(horizon):
            continue
        aligned, _ = midnight_aligned(values[None, held[0]:], first + held[0] * step_s, step_s)
        day = int(round(DAY_S / step_s))
        # the regime forecast's upper quantile, or the same hours a day earlier when that was busier
        # (demand that jumps at the same hour every day: the level alone only sees it once it came)
        ahead = np.fmax(forecast(aligned, horizon, day).upper, seasonal_naive(aligned, horizon, day))
        out[team] = float(np.nanmax(ahead))
    return out
