"""`cnsched report capacity`: per accelerator class and site, the weekly card-hours run, their
forecast for the next weeks with an interval (core.capacity.weekly_forecast), the utilisation of the
last week, and the cards that would keep the p95 wait under a target at the forecast demand
(core.capacity.cards_for_wait: the last four weeks' jobs per hour, mean job size and length, scaled
by the forecast against those weeks' mean)."""

from __future__ import annotations

import numpy as np

from core.capacity import cards_for_wait, weekly_forecast

WEEK_S = 7 * 86_400.0
RECENT_WEEKS = 4


def capacity_plan(weekly: list[tuple], cards: dict[tuple[str, str], int], weeks: int = 4,
                  wait_target_h: float = 1.0, level: float = 0.9) -> list[dict]:
    """One row per (class, site) seen in ``weekly`` (``sinks.cost.weekly_demand``)."""
    groups: dict[tuple[str, str], list[tuple]] = {}
    for row in weekly:
        groups.setdefault((row[0], row[1]), []).append(row)
    out = []
    for (klass, site), rows in sorted(groups.items()):
        first, last = rows[0][2], rows[-1][2]
        n = int(round((last - first) / WEEK_S)) + 1
        card_h, jobs = np.zeros(n), np.zeros(n)
        for _, _, week, ch, nj, _, _ in rows:
            k = int(round((week - first) / WEEK_S))
            card_h[k], jobs[k] = ch, nj
        mean, lo, hi = weekly_forecast(card_h, weeks, level)
        recent = slice(max(n - RECENT_WEEKS, 0), n)
        job_cards = float(np.nanmean([r[5] for r in rows[-RECENT_WEEKS:] if r[5]] or [np.nan]))
        lam = jobs[recent].sum() / (len(card_h[recent]) * 168.0)
        hours = card_h[recent].sum() / max(jobs[recent].sum(), 1) / job_cards if job_cards > 0 else 0.0
        growth = float(mean.max() / card_h[recent].mean()) if card_h[recent].mean() > 0 else 1.0
        have = cards.get((klass, site), 0)
        out.append({
            "accel_class": klass, "site": site, "weeks_seen": n, "cards": have,
            "last_week_card_h": round(float(card_h[-1]), 2),
            "utilisation_last_week_pct": round(100 * card_h[-1] / (have * 168.0), 1) if have else None,
            "wait_p95_last_week_s": None if rows[-1][6] is None else round(float(rows[-1][6]), 1),
            "forecast_card_h": [round(float(v), 2) for v in mean],
            "forecast_low": [None if np.isnan(v) else round(float(v), 2) for v in lo],
            "forecast_high": [None if np.isnan(v) else round(float(v), 2) for v in hi],
            "cards_needed": cards_for_wait(lam * growth, hours, job_cards, wait_target_h) if hours > 0 else 0,
            "wait_target_h": wait_target_h,
        })
    return out
