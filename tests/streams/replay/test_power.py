"""The replay's site power (streams/replay/power.py): curves from start and stop events, the worst
site's figures, and power-aware starts spacing jobs under a ramp limit for ours and the baselines."""

import numpy as np
import pytest

from streams.replay.cluster import build_cluster
from streams.replay.power import SitePower
from streams.replay.results import power_summary, replay
from streams.replay.world import SimConfig
from tests.helpers.data import needs_data
from tests.streams.replay.test_engine import QUIET, SPEC, trace, two_sites


def test_curves_follow_the_jobs_that_work():
    p = SitePower(["east", "west"], card_kw=500.0, limit_mw_per_min=0.0)
    site = np.array([0, 0, 1])
    draw = p.draw(site, [0, 1], 2)  # 2 cards on two east nodes: 2 MW
    assert draw == {0: 2.0}
    p.on(7, 30.0, draw)
    p.on(8, 90.0, p.draw(site, [2], 4))  # 2 MW in the west from 90 s
    p.off(7, 150.0)
    curves = p.curves(200.0)
    # minute ends 0, 60, 120, 180: east 2 from the first minute's events until 120-180; west from 60-120
    assert curves.tolist() == [[2.0, 2.0, 0.0, 0.0], [0.0, 2.0, 2.0, 2.0]]
    f = p.summary(200.0)
    assert f["max_ramp_mw_per_min"] == 2.0 and f["peak_mw"] == 2.0 and f["minutes_over_limit"] == 0
    # 2 + 2 + 2 + 2 + 2 MW over one-minute samples: 10 MW-min = 0.167 MWh
    assert f["energy_mwh"] == 0.167
    p.off(99, 10.0)  # a job never on: nothing


def test_a_stop_before_the_delayed_start_cancels_out():
    p = SitePower(["east"], card_kw=1000.0, limit_mw_per_min=0.0)
    p.on(1, 120.0, {0: 1.0})
    p.off(1, 30.0)  # failed while waiting for its start
    assert p.curves(180.0).tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_a_ramp_limit_spaces_the_starts_of_every_policy():
    # eight 8-card jobs submitted together on 8 nodes of 8 cards at 100 kW a card: 0.8 MW each
    t = trace([0.0] * 8, [3600.0] * 8, [8] * 8, [1] * 8)
    cluster = build_cluster(two_sites(5.0, 10.0), SPEC)
    # our scheduler without its moves (ours-static): a job moved to a faster card as the first ones end
    # would end by its move too, which is not what is measured here
    policies = ("ours-static", "topology")
    free = replay(t, cluster, SimConfig(cluster=SPEC, card_kw=100.0, **QUIET), policies)
    capped = replay(t, cluster, SimConfig(cluster=SPEC, card_kw=100.0, ramp_limit_mw_per_min=1.0, **QUIET), policies)
    before, after = power_summary(free), power_summary(capped)
    for p in policies:
        assert before[p]["max_ramp_mw_per_min"] >= 2.4  # at least 3 jobs on one site in the first minute
        assert after[p]["max_ramp_mw_per_min"] <= 1.0 + 1e-9 and after[p]["minutes_over_limit"] == 0
        # cost = card-hours held x 1.0 + MWh x 100 (the defaults of cnsched report cost)
        assert after[p]["cost"] == pytest.approx(after[p]["card_hours"] + 100 * after[p]["energy_mwh"], abs=0.01)
        # eight jobs x 8 cards x 0.1 MW for their working time: 6.4 MW x the hours they worked
        assert after[p]["energy_mwh"] > 0 and after[p]["card_hours"] >= 64 * (2400 / 3600) - 1e-6
        # one 0.8 MW start per site per minute: four per site put off by 0, 60, 120 and 180 s (mean 90)
        late = capped.outcomes[(p, 0)].end - free.outcomes[(p, 0)].end
        assert 60.0 <= late.mean() <= 120.0 and late.min() >= -1e-6 and late.max() <= 180.0 + 1e-6


@needs_data
def test_simulate_writes_the_curves_battery_sizes(tmp_path, capsys):
    import json

    from streams.cli.main import main

    jobs = tmp_path / "jobs.csv"
    rows = "".join(f"{i * 50},{3000 + i},8,1,u{i % 3},Pass,training-data-parallel\n" for i in range(6))
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n" + rows)
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms,gbps\na,b,40,2\nb,a,40,2\n")
    out = tmp_path / "power"
    assert main(["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2",
                 "--racks-per-site", "2", "--nodes-per-rack", "2", "--seeds", "1", "--policies", "ours,topology",
                 "--card-kw", "100", "--power-csv", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(p.rsplit("/", 1)[1] for p in doc["power_csv"]) == ["ours-a.csv", "ours-b.csv", "topology-a.csv",
                                                                     "topology-b.csv"]
    lines = (out / "ours-a.csv").read_text().splitlines()
    assert lines[0] == "minute,power_mw" and lines[1].startswith("0,")
    # six 8-card jobs at 100 kW a card: 0.8 MW each, so every curve is a multiple of 0.8 MW
    mw = np.array([float(x.split(",")[1]) for x in lines[1:]])
    assert np.allclose(mw / 0.8, np.round(mw / 0.8)) and mw.max() > 0
    # what cnsched battery reads: the power_mw column, one sample a minute
    assert main(["battery", str(out / "ours-a.csv"), "--window", "15min", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["power_capacity_mw"] > 0
