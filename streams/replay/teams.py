"""Teams in the replay: the trace's users grouped into teams, quotas from each team's demand, and what
each team got — JCT, wait and slowdown by team, Jain's fairness index over teams, preemptions and the
work they cost — for the policy with quotas (``ours-quotas``) beside the others.

Teams: every user goes to one of ``SimConfig.teams`` teams (a hash of the name: teams of uneven
size and demand, as real ones are). Quotas: half the cluster's cards are split equally between the
teams and half by each team's share of the trace's card-seconds (rounded down: every team is
guaranteed something, the busy ones more); a team may hold ``quota_max_factor`` times its guarantee
(0, the default: no maximum — idle cards are lent freely and taken back by preemption when their
owner needs them; a maximum leaves cards idle while a team waits).
Fairness: Jain's index (sum x)^2 / (n sum x^2) over teams of x = the team's mean slowdown (JCT over the
job's ideal duration): 1 when every team waits alike.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from schemas.quota import Quota, QuotaSet


def team_names(users: list[str], teams: int, seed: int) -> list[str]:
    """Each user's team (no user: no team)."""
    return [f"team-{zlib.crc32(f'{seed}:{u}'.encode()) % teams}" if u else "" for u in users]


def quota_set(team: list[str], card_seconds: np.ndarray, cluster_cards: int, max_factor: float) -> QuotaSet:
    """Guarantees half equal, half in proportion to each team's demand (card-seconds), adding up to at
    most the cluster."""
    names = sorted({t for t in team if t})
    if not names:
        return QuotaSet()
    demand = np.array([card_seconds[[t == n for t in team]].sum() for n in names])
    g = np.floor(cluster_cards * (0.5 * demand / demand.sum() + 0.5 / len(names)) + 1e-9).astype(int)
    return QuotaSet(quotas=[Quota(team=n, guaranteed_cards=int(x),
                                  max_cards=min(cluster_cards, max(int(x * max_factor), int(x), 1)) if max_factor > 0 else None)
                            for n, x in zip(names, g, strict=True)])


def stop_preempted(replay) -> None:
    """Jobs the Scheduler preempted stop in the replay; each resumes from its last checkpoint (of work)
    when placed again, and the work since is counted as lost."""
    done, replay.sched.preemptions = replay.sched.preemptions, []
    for p in done:
        j = int(p.task_id[1:])
        if j in replay.running:
            r = replay._stop(j)
            ce = replay.cfg.checkpoint_every_s
            replay.resume[j] = math.floor(r.work / ce) * ce
            replay.out.preemptions[j] += 1
            replay.out.lost_card_s += (r.work - replay.resume[j]) * r.per_work * replay.jobs.cards[j] * len(r.members)


def jain(x: np.ndarray) -> float:
    """Jain's fairness index of ``x`` (1: all equal; 1/n: one takes all)."""
    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x)]
    return float(x.sum() ** 2 / (x.size * (x ** 2).sum())) if x.size and (x ** 2).sum() > 0 else float("nan")


def team_summary(run) -> dict:
    """Per policy (pooled over seeds): per team jobs, mean JCT, wait and slowdown; Jain's index over
    teams' mean slowdown; preemptions and the card-hours of work they lost; quota violations seen."""
    out = {}
    for p in run.policies:
        per_team: dict[str, dict[str, list]] = {}
        pre = lost = violations = 0
        for seed in run.seeds:
            o, jobs = run.outcomes[(p, seed)], run.jobs[seed]
            done = np.array([s == "finished" for s in o.state])
            jct, wait = o.end - jobs.submit, o.start - jobs.submit
            for j in np.flatnonzero(done):
                d = per_team.setdefault(jobs.team[j] or "-", {"jct": [], "wait": [], "slowdown": []})
                d["jct"].append(jct[j])
                d["wait"].append(wait[j])
                d["slowdown"].append(jct[j] / jobs.ideal[j])
            pre += int(o.preemptions.sum())
            lost += o.lost_card_s
            violations += o.quota_violations
        teams = {t: {"jobs": len(d["jct"]), "jct_mean_s": float(np.mean(d["jct"])),
                     "wait_mean_s": float(np.mean(d["wait"])), "slowdown_mean": float(np.mean(d["slowdown"]))}
                 for t, d in sorted(per_team.items())}
        out[p] = {"teams": teams, "jain_slowdown": jain(np.array([v["slowdown_mean"] for v in teams.values()])),
                  "preemptions": pre, "lost_card_hours": lost / 3600.0, "quota_violations": violations}
    return out
