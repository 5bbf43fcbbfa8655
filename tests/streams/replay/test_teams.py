"""Teams in the replay (streams/replay/teams.py): quotas from demand, Jain's index, and a planted case
where a team's job reclaims borrowed cards at once with quotas and waits a whole job without them."""

import numpy as np
import pytest

from streams.replay.cluster import build_cluster
from streams.replay.engine import Replay
from streams.replay.jobs import sim_jobs
from streams.replay.teams import jain, quota_set, team_names
from streams.replay.world import SimConfig
from tests.streams.replay.test_engine import QUIET, SPEC, trace, two_sites


def test_jain_worked_examples():
    assert jain(np.array([3.0, 3.0, 3.0])) == 1.0
    assert jain(np.array([1.0, 0.0, 0.0, 0.0])) == 0.25  # one takes all of four
    assert jain(np.array([1.0, 2.0])) == pytest.approx(9 / 10)  # (1 + 2)^2 / (2 x (1 + 4))
    assert np.isnan(jain(np.array([])))


def test_quotas_half_equal_half_by_demand():
    # 16 cards; a asks 300 card-seconds, b 100: a 16 x (0.5 x 0.75 + 0.25) = 10, b 16 x (0.5 x 0.25 + 0.25) = 6
    qs = quota_set(["a", "a", "b", ""], np.array([100.0, 200.0, 100.0, 999.0]), 16, 2.0)
    got = {q.team: (q.guaranteed_cards, q.max_cards) for q in qs.quotas}
    assert got == {"a": (10, 16), "b": (6, 12)}  # max: twice the guarantee, at most the cluster
    assert quota_set(["", ""], np.ones(2), 16, 2.0).quotas == []
    assert [q.max_cards for q in quota_set(["a", "b"], np.ones(2), 16, 0.0).quotas] == [None, None]  # 0: no maximum
    assert team_names(["u1", "u1", ""], 6, 0)[0] == team_names(["u1"], 6, 0)[0] and team_names([""], 6, 0) == [""]


def test_planted_a_small_team_reclaims_borrowed_cards_instead_of_waiting_a_whole_job():
    cfg = SimConfig(cluster=SPEC, data_share=0.0, epoch_s=1800.0, teams=6, **QUIET)
    users = ["big"] * 8 + ["small"]
    assert len(set(team_names(users, 6, cfg.seed))) == 2
    # 8 one-node jobs of 8 cards fill the 64 cards at t = 0..7 for 100,000 s; at t = 1,000 the other
    # team's 8-card job of 1,000 s arrives
    t = trace([0, 1, 2, 3, 4, 5, 6, 7, 1000], [100_000] * 8 + [1000], [8] * 9, [1] * 9, users)
    cluster = build_cluster(two_sites(), SPEC)
    jobs = sim_jobs(t, cluster, cfg)
    # guarantees: big 64 x (0.5 x 6.4e6 / 6.408e6 + 0.25) = 47, small 64 x (0.5 x 8e3 / 6.408e6 + 0.25) = 16
    qs = {q.team: q.guaranteed_cards for q in quota_set(jobs.team, jobs.ideal * jobs.cards * jobs.nodes, 64, 2.0).quotas}
    assert sorted(qs.values()) == [16, 47]
    with_quotas = Replay(jobs, cluster, cfg, "ours-quotas", []).run()
    without = Replay(jobs, cluster, cfg, "ours", []).run()
    assert with_quotas.start[8] == 1000.0  # placed on arrival: big held 64 > 47, borrowed
    assert without.start[8] > 50_000  # waits for a big job to end
    # the victim: a borrowed job (placed after big's 47 were full), the one that ran least (placed at
    # t = 7): 993 s of work since placement, no checkpoint yet, on 8 cards
    assert with_quotas.preemptions.tolist() == [0] * 7 + [1, 0]
    assert with_quotas.lost_card_s == pytest.approx(993 * 8)
    assert with_quotas.quota_violations == 0 and with_quotas.state == ["finished"] * 9
    assert with_quotas.end[7] > without.end[7]  # it pays for it: it resumes from the start later
