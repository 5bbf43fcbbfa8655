"""The metrics handle over prometheus_client: counters, gauges and histograms in the text format,
with worked values, and a label mismatch that never raises."""

from prometheus_client.parser import text_string_to_metric_families

from streams.metrics import HISTOGRAMS, Counters


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_counters_gauges_histograms_in_the_text_format():
    c = Counters()
    c.describe("messages_total", "probe.samples messages read")
    c.inc("messages_total")
    c.inc("messages_total", 2)
    c.inc("samples_rejected_total", 5, reason="non_finite")
    c.set("queued_tasks", 7, team="a")
    c.set("queued_tasks", 3, team="a")  # last value wins
    for v in (0.004, 0.02, 0.02, 3.0):
        c.observe("decision_seconds", v)
    text = c.exposition()
    assert "# HELP cnsched_messages_total probe.samples messages read" in text
    assert "# TYPE cnsched_messages_total counter" in text
    assert "# TYPE cnsched_decision_seconds histogram" in text
    assert "_created" not in text
    s = samples(text)
    assert s[("cnsched_messages_total", ())] == 3
    assert s[("cnsched_samples_rejected_total", (("reason", "non_finite"),))] == 5
    assert s[("cnsched_queued_tasks", (("team", "a"),))] == 3
    # buckets are cumulative: <= 0.005 holds 1, <= 0.025 holds 3, <= 5 holds all 4; sum 3.044
    assert s[("cnsched_decision_seconds_bucket", (("le", "0.005"),))] == 1
    assert s[("cnsched_decision_seconds_bucket", (("le", "0.025"),))] == 3
    assert s[("cnsched_decision_seconds_bucket", (("le", "5.0"),))] == 4
    assert s[("cnsched_decision_seconds_bucket", (("le", "+Inf"),))] == 4
    assert s[("cnsched_decision_seconds_count", ())] == 4
    assert abs(s[("cnsched_decision_seconds_sum", ())] - 3.044) < 1e-9
    assert c.get("messages_total") == 3 and c.get("queued_tasks", team="a") == 3 and c.get("nothing") == 0


def test_every_histogram_has_increasing_buckets_and_a_help():
    for name, (help_text, buckets) in HISTOGRAMS.items():
        assert help_text and list(buckets) == sorted(set(buckets)), name


def test_a_label_mismatch_drops_the_value_and_never_raises():
    c = Counters()
    c.inc("decisions_total", status="placed")
    c.inc("decisions_total")  # no labels: dropped, logged once
    c.set("decisions_total", 5, status="placed")  # a counter used as a gauge: dropped
    assert c.get("decisions_total", status="placed") == 1
    c.inc("tasks_total")
    c.set("tasks", 3, state="queued")  # prometheus_client names both "cnsched_tasks": the gauge is dropped
    assert c.get("tasks_total") == 1 and "cnsched_tasks{" not in c.exposition()


def test_two_handles_never_share_values():
    a, b = Counters(), Counters()
    a.inc("messages_total")
    assert b.get("messages_total") == 0 and a.get("messages_total") == 1
