"""deploy/alerts.yml, checked by Prometheus's own tools: promtool parses every rule, and each alert
fires on a planted case (and stays quiet beside it) in promtool's rule unit tests. Every metric the
rules name is one the worker exports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "alerts.yml"
PROMTOOL = os.environ.get("CNSCHED_PROMTOOL") or shutil.which("promtool") or "/usr/bin/promtool"

# two workers scraped: only the scheduler's owner exports per-node series (w1)
CASES = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'cnsched_node_up{{node="n1", instance="w1"}}'
        values: '1 1 0 0 0 0 0'
      - series: 'cnsched_node_up{{node="n2", instance="w1"}}'
        values: '1 1 1 1 1 1 1'
      - series: 'cnsched_path_quality{{src="n1", dst="n2", instance="w1"}}'
        values: '90 30 30 30 30 30 30 30'
      - series: 'cnsched_path_quality{{src="n2", dst="n1", instance="w1"}}'
        values: '90 90 90 90 90 90 90 90'
      - series: 'cnsched_path_loss_ratio{{src="n2", dst="n1", instance="w1"}}'
        values: '0 0 0 0 0 0 0 0'
      - series: 'cnsched_queue_starving_tasks{{instance="w1"}}'
        values: '0 2 2 2 2 2 2 2 2 2 2 2 2'
      - series: 'cnsched_incidents_open{{scope="site", instance="w1"}}'
        values: '0 0 1 1 1 0 0'
      - series: 'cnsched_incidents_open{{scope="path", instance="w1"}}'
        values: '0 0 0 0 2 2 2'
      - series: 'cnsched_incidents_open{{scope="node", instance="w1"}}'
        values: '3 3 3 3 3 3 3'
    alert_rule_test:
      - eval_time: 2m
        alertname: CnschedNodeDown
        exp_alerts: []
      - eval_time: 3m
        alertname: CnschedNodeDown
        exp_alerts:
          - exp_labels: {{severity: page, node: n1}}
            exp_annotations:
              summary: "node n1 is down"
              description: "cnsched sees n1 down (failed, silent past CNSCHED_NODE_TIMEOUT_SECONDS, or reported down) for 30 seconds; its tasks are moved or re-queued (GET /incidents)."
      - eval_time: 2m
        alertname: CnschedSiteDown
        exp_alerts: []
      - eval_time: 3m
        alertname: CnschedSiteDown
        exp_alerts:
          - exp_labels: {{severity: page}}
            exp_annotations:
              summary: "1 sites are dark"
              description: "every node of a site is down for 30 seconds (one incident per site, scope site: GET /incidents); its tasks are moved or re-queued."
      - eval_time: 6m
        alertname: CnschedSiteDown
        exp_alerts: []
      - eval_time: 4m
        alertname: CnschedPathDown
        exp_alerts: []
      - eval_time: 5m
        alertname: CnschedPathDown
        exp_alerts:
          - exp_labels: {{severity: warn}}
            exp_annotations:
              summary: "2 paths between working nodes are dark"
              description: "every probe lost both ways between two nodes that reach the others, for 30 seconds (scope path: GET /incidents); gangs across them move (path_failed)."
      - eval_time: 7m
        alertname: CnschedPathDegraded
        exp_alerts:
          - exp_labels: {{severity: warn, src: n1, dst: n2}}
            exp_annotations:
              summary: "path n1 -> n2 is degraded"
              description: "quality below 40 of 100, or loss above 1 %, for 5 minutes (GET /network/paths/n1/n2)."
      - eval_time: 5m
        alertname: CnschedQueueStarving
        exp_alerts: []
      - eval_time: 12m
        alertname: CnschedQueueStarving
        exp_alerts:
          - exp_labels: {{severity: warn}}
            exp_annotations:
              summary: "2 queued tasks have waited past CNSCHED_MAX_WAIT_SECONDS"
              description: "tasks are starving for 10 minutes: see their reasons with `cnsched tasks --status queued`."
"""


def promtool() -> str:
    if not Path(PROMTOOL).exists():
        pytest.fail(f"{PROMTOOL} not found: `make test` installs Debian's prometheus (promtool)")
    return PROMTOOL


def test_the_rules_parse():
    out = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert out.returncode == 0 and "SUCCESS: 5 rules found" in out.stdout, out.stdout + out.stderr


def test_each_alert_fires_on_its_planted_case_and_not_before(tmp_path):
    cases = tmp_path / "cases.yml"
    cases.write_text(CASES.format(rules=RULES))
    out = subprocess.run([promtool(), "test", "rules", str(cases)], capture_output=True, text=True)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_a_wrong_expectation_fails(tmp_path):
    """The rule tests can fail: n2 is never down."""
    cases = tmp_path / "cases.yml"
    cases.write_text(CASES.format(rules=RULES).replace("node: n1}", "node: n2}"))
    out = subprocess.run([promtool(), "test", "rules", str(cases)], capture_output=True, text=True)
    assert out.returncode != 0


def test_every_metric_the_rules_name_is_exported():
    from streams.worker.scheduling import agent, gauges

    named = set(re.findall(r"cnsched_([a-z_]+)", RULES.read_text()))
    assert named == {"node_up", "path_quality", "path_loss_ratio", "queue_starving_tasks", "incidents_open"}
    assert named <= set(gauges.METRICS) | set(agent.METRICS)
