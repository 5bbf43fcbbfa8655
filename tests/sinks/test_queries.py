"""`cnsched report benefit` and `report alpha` on a small audit whose figures are worked out by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sinks.duckdb_store import DuckStore
from sinks.queries import run_sections


def decision(task_id, at, nodes, compute_only, composite, network, co_composite, co_network, task_type,
             submitted, cards=1, peers=1, alpha=0.5, status="placed"):
    return {"task_id": task_id, "decided_at": at, "status": status, "nodes": nodes, "alpha": alpha,
            "network_profile": "balanced", "task_type": task_type, "submitted_at": submitted, "cards": cards,
            "peers": peers, "compute_only_nodes": compute_only, "compute_only_composite": co_composite,
            "compute_only_network_score": co_network, "state_version": 1,
            "candidates": [{"node": nodes[0], "compute_score": 2 * composite - network, "network_score": network,
                            "alpha": alpha, "composite": composite}] if nodes else []}


@pytest.fixture
def audit(tmp_path):
    path = tmp_path / "audit.duckdb"
    with DuckStore(path) as s:
        s.write_decisions([
            # t1: queued 10 s, then placed on n1 where compute-only would pick n2
            decision("t1", 100.0, [], [], 0, 0, None, None, "fine-tune", 90.0, status="unschedulable"),
            decision("t1", 100.0 + 0.5, ["n1"], ["n2"], 80.0, 90.0, 60.0, 40.0, "fine-tune", 90.5),
            # t2: placed at once on n2, the compute-only choice too; 2 cards x 2 peers
            decision("t2", 200.0, ["n2", "n3"], ["n3", "n2"], 70.0, 60.0, 70.0, 60.0, "fine-tune", 200.0,
                     cards=2, peers=2),
            # t3: another type, never finished
            decision("t3", 300.0, ["n1"], ["n1"], 50.0, 50.0, 50.0, 50.0, "inference", 296.0),
        ])
        s.write_task_events([
            {"task_id": "t1", "event": "started", "at": 100.5},
            {"task_id": "t1", "event": "finished", "at": 400.5, "duration_s": 300.0, "throughput": 100.0},
            {"task_id": "t2", "event": "started", "at": 200.0},
            {"task_id": "t2", "event": "finished", "at": 300.0, "throughput": 50.0},  # no duration: 100 s
            {"task_id": "t3", "event": "started", "at": 300.0},  # running until the last event (400.5)
        ])
        s.write_compute_reports([{"node": n, "ts": 1.0, "cards": 8} for n in ("n1", "n2", "n3")]
                                + [{"node": "n3", "ts": 2.0, "cards": 4}])  # the latest report counts
    return path


def test_benefit_figures_worked_by_hand(audit):
    with DuckStore(audit, read_only=True) as s:
        outcomes, counterfactual, util, replayed, head = run_sections(s.con)
    assert replayed["rows"] == [] and head["rows"] == []  # no replay stored yet
    rows = {r[0]: r for r in outcomes["rows"]}
    # fine-tune: 2 placed, 2 finished; completion (300 + 100) / 2; queueing (10 + 0) / 2 (t1 first
    # placed at 100.5, submitted 90.5); throughput (100 + 50) / 2
    assert rows["fine-tune"] == ("fine-tune", 2, 2, 200.0, 5.0, 75.0)
    assert rows["inference"] == ("inference", 1, 0, None, 4.0, None)
    rows = {r[0]: r for r in counterfactual["rows"]}
    # t1 differed (n1 vs n2), t2 did not (same set); chosen composite (80 + 70) / 2 vs (60 + 70) / 2
    assert rows["fine-tune"] == ("fine-tune", 2, 1, 0.5, 75.0, 65.0, 75.0, 50.0)
    # cards 8 + 8 + 4 = 20; span 100.5 .. 400.5 = 300 s; used: t1 300 x 1 + t2 100 x 4 + t3 100.5 x 1
    assert util["rows"] == [(20, 300.0, 800.5, round(100 * 800.5 / (20 * 300), 2))]


def cli(path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_DUCKDB_PATH"] = str(path)
    return subprocess.run([sys.executable, "-m", "streams.cli", "report", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_prints_tables_and_the_sql_behind_them(audit, tmp_path):
    r = cli(audit, "benefit", "--show-sql")
    assert r.returncode == 0, r.stderr
    assert "Outcomes by task type" in r.stdout and "fine-tune" in r.stdout
    assert "compute_only_composite" in r.stdout  # the SQL is printed
    assert cli(audit, "benefit").stdout.count("SELECT") == 0
    j = json.loads(cli(audit, "benefit", "--json").stdout)
    assert j[2]["rows"][0]["cluster_cards"] == 20
    a = cli(audit, "alpha", "--json", "--min-tasks", "3")
    assert a.returncode == 0 and json.loads(a.stdout)[0]["task_type"] == "fine-tune"
    assert json.loads(a.stdout)[0]["tasks"] == 2 and not json.loads(a.stdout)[0]["in_use"]
    missing = cli(tmp_path / "nope.duckdb", "benefit")
    assert missing.returncode == 1 and missing.stderr.startswith("cnsched: duckdb: no DuckDB file")
    bad = cli(audit, "alpha", "--min-tasks", "1")
    assert bad.returncode == 2 and "--min-tasks" in bad.stderr


def test_sql_exports_parquet_from_the_read_only_connection(audit, tmp_path):
    import pyarrow.parquet as pq

    env = {k: v for k, v in os.environ.items() if not k.startswith("CNSCHED_")}
    env["CNSCHED_DUCKDB_PATH"] = str(audit)
    out = tmp_path / "audit.parquet"
    copy = f"COPY (SELECT task_id, migrations FROM task_audit ORDER BY task_id) TO '{out}' (FORMAT parquet)"

    def sql(query, *flags):
        return subprocess.run([sys.executable, "-m", "streams.cli", "sql", query, *flags],
                              capture_output=True, text=True, env=env, timeout=120)

    # other files are out of reach unless the flag allows them (issue 15)
    for query in (copy, "SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access = true"):
        r = sql(query)
        assert r.returncode == 1 and r.stderr.startswith("cnsched: sql:"), (query, r.stderr)
    assert not out.exists()
    r = sql(copy, "--allow-files")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).to_pydict() == {"task_id": ["t1", "t2", "t3"], "migrations": [0, 0, 0]}


def test_incidents_stored_once_and_reported_per_incident(tmp_path):
    from sinks.queries import INCIDENTS

    opened = {"node": "n1", "status": "open", "cause": "unknown", "detected_at": 100.0, "located_at": None,
              "recovered_at": None, "tasks": ["a", "b"], "work_lost_s": 30.0}
    located = {**opened, "cause": "compute", "located_at": 104.0}
    mitigated = {**located, "status": "mitigated", "mitigated_at": 112.25, "outcomes": {"a": "moved to n3", "b": "queued"}}
    recovered = {**mitigated, "status": "recovered", "recovered_at": 160.5, "resolution": "node back"}
    other = {**opened, "node": "n2", "detected_at": 200.0, "tasks": []}
    third = {**other, "node": "n4", "status": "mitigated", "mitigated_at": 230.0}
    site = {**other, "node": "site/B", "scope": "site", "nodes": ["n5", "n6"], "detected_at": 300.0}
    with DuckStore(tmp_path / "i.duckdb") as s:
        assert s.write_incidents([opened, mitigated, recovered, other, third, site]) == 6
        assert s.query("SELECT node, scope, nodes FROM incidents WHERE detected_at >= 200 ORDER BY node") == [
            ("n2", "node", None), ("n4", "node", None), ("site/B", "site", ["n5", "n6"])]
        assert s.write_incidents([opened, located, mitigated, recovered]) == 0  # redelivered (one row per status)
        (section,) = run_sections(s.con, INCIDENTS)
        assert s.query("SELECT outcomes::JSON->>'b', resolution FROM incidents WHERE status = 'recovered'") == [
            ("queued", "node back")]
    rows = [dict(zip(section["columns"], r, strict=True)) for r in section["rows"]]
    # n1: located 4 s, its tasks elsewhere 12.25 s and the node back 60.5 s after detection; n2 still open,
    # cause unknown; n4 mitigated (its tasks elsewhere), the node still down
    assert [(r["node"], r["status"], r["cause"], r["locate_s"], r["mitigate_s"], r["recover_s"], r["tasks"])
            for r in rows] == [("n1", "recovered", "compute", 4.0, 12.3, 60.5, 2),
                               ("n2", "open", "unknown", None, None, None, 0),
                               ("n4", "mitigated", "unknown", None, 30.0, None, 0),
                               ("site/B", "open", "unknown", None, None, None, 0)]
    assert [r["scope"] for r in rows] == ["node", "node", "node", "site"]


def test_benefit_shows_the_latest_replay_as_measured_times(audit):
    change = {"policy": "ours", "against": "compute-only", "class": "sensitive", "jct_change": -0.123,
              "ci_low": -0.2, "ci_high": -0.05, "interval_over": "seeds"}
    run = {"policy": "ours", "class": "sensitive", "jobs": 3, "trace": "philly:x"}
    head = {"policy": "ours", "against": "topology", "kind": "gang", "metric": "jct", "change": -0.0444,
            "ci_low": -0.09, "ci_high": 0.006, "seeds": 10, "jobs": 120, "mean_policy_s": 1000.4,
            "mean_against_s": 1046.9, "p50_policy_s": 500.0, "p50_against_s": 510.0, "p95_policy_s": 3000.0,
            "p95_against_s": 3100.0, "paired_median": 0.98765, "top10_share": 0.613}
    with DuckStore(audit) as s:
        s.write_replay("old", [{**run, "created_at": 1.0}], [{**change, "jct_change": 0.5}], [], [head])
        s.write_replay("new", [{**run, "created_at": 2.0}], [change], [], [head])
        s.write_replay("new", [{**run, "created_at": 2.0}], [change], [], [head])  # written again: replaces itself
        assert s.con.execute("SELECT count(*) FROM sim_changes").fetchone()[0] == 2
        assert s.con.execute("SELECT count(*) FROM sim_headline").fetchone()[0] == 2
    with DuckStore(audit, read_only=True) as s:
        *_, replayed, headline = run_sections(s.con)
    assert "scores" in run_sections.__defaults__[0][1][0]  # the live counterfactual is labelled as scores
    assert replayed["rows"] == [("new", "philly:x", "ours", "compute-only", "sensitive", -12.3, -20.0, -5.0, "seeds")]
    # the latest run's headline: percentages to a tenth, seconds whole, the share in percent
    assert headline["rows"] == [("ours", "topology", "gang", "jct", 10, 120, -4.4, -9.0, 0.6, 1000.0, 1047.0, 500.0,
                                 510.0, 0.988, 61.0)]


def test_quota_report_by_team_with_worked_numbers(tmp_path):
    from sinks.queries import QUOTAS

    def d(task, at, status, team, submitted, cards=8, **extra):
        return {"task_id": task, "decided_at": at, "status": status, "nodes": ["n"], "alpha": 0.5,
                "network_profile": "balanced", "submitted_at": submitted, "cards": cards, "peers": 1,
                "team": team, "candidates": [], "state_version": 1, **extra}

    decisions = [d("r1", 10.0, "placed", "research", 0.0), d("r2", 20.0, "placed", "research", 10.0),
                 d("p1", 130.0, "placed", "prod", 100.0),
                 d("r2", 130.0, "preempted", "research", 10.0, preempted_by="p1", work_lost_s=900.0),
                 d("r2", 400.0, "placed", "research", 10.0), d("x", 5.0, "placed", "", 5.0, cards=4)]
    finished = [{"task_id": t, "event": "finished", "at": 5000.0, "duration_s": s}
                for t, s in (("r1", 3600.0), ("r2", 1800.0), ("p1", 7200.0), ("x", 900.0))]
    with DuckStore(tmp_path / "q.duckdb") as s:
        s.write_decisions(decisions)
        s.write_task_events(finished)
        s.write_quota_changes([{"quotas": [{"team": "research", "guaranteed_cards": 8},
                                           {"team": "prod", "guaranteed_cards": 16}], "changed_at": 1.0}])
        teams, fairness = run_sections(s.con, QUOTAS)
    rows = {r[0]: dict(zip(teams["columns"], r, strict=True)) for r in teams["rows"]}
    # research: waits 10 and 10 s (first placements), one preemption losing 900 s on 8 cards = 2 card-h;
    # finished 3,600 + 1,800 s on 8 cards = 12 card-h; prod waited 30 s, 7,200 s on 8 cards = 16 card-h;
    # a task without a team is team default, 900 s on 4 cards = 1 card-h
    r, p, x = rows["research"], rows["prod"], rows["default"]
    assert (r["tasks"], r["placed"], r["wait_mean_s"], r["preemptions"], r["lost_card_h"], r["card_h"],
            r["guaranteed_cards"]) == (2, 2, 10.0, 1, 2.0, 12.0, 8.0)
    assert (p["wait_mean_s"], p["preemptions"], p["card_h"], p["guaranteed_cards"]) == (30.0, 0, 16.0, 16.0)
    assert (x["card_h"], x["guaranteed_cards"]) == (1.0, None)
    # Jain over x = card-hours per guaranteed card: research 12 / 8 = 1.5, prod 16 / 16 = 1, default 1
    # (no guarantee: its card-hours): (3.5)^2 / (3 x (2.25 + 1 + 1)) = 12.25 / 12.75 = 0.9608
    (f,) = fairness["rows"]
    assert f[0] == 3 and f[1] == 0.9608


def test_node_maintenance_is_audited_once_per_command(tmp_path):
    drain = {"node": "n1", "action": "drain", "at": 100.0, "deadline_s": 600.0, "by": "ops", "reason": "firmware"}
    back = {"node": "n1", "action": "uncordon", "at": 900.0, "by": "ops"}
    with DuckStore(tmp_path / "m.duckdb") as s:
        assert s.write_maintenance([drain, back]) == 2
        assert s.write_maintenance([drain]) == 0  # redelivered
        assert s.query("SELECT node, action, deadline_s, requested_by, reason FROM node_maintenance "
                       "ORDER BY issued_at") == [
            ("n1", "drain", 600.0, "ops", "firmware"), ("n1", "uncordon", None, "ops", None)]
