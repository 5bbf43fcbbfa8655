"""Times and tables for a person: UTC clock times, ages, which query columns are times, and the
describe and list renderings worked out on a record."""

from streams.cli.data import sql_table
from streams.cli.listing import node_row, task_row
from streams.render.describe import describe_node, describe_task
from streams.render.human import is_time_column, span, when

T = 1_764_601_445.0  # 2025-12-01 15:04:05 UTC


def test_when_span_and_time_columns():
    assert when(T) == "2025-12-01 15:04:05Z" and when(None) == "-" and when(float("nan")) == "-"
    assert [span(x) for x in (0, 45, 192, 7500, 3 * 86400 + 4 * 3600 + 5, -3, None)] == \
        ["0s", "45s", "3m12s", "2h05m", "3d04h", "0s", "-"]
    assert is_time_column("decided_at", [T, None]) and is_time_column("ts", [T])
    assert not is_time_column("decided_at", [10_000.0])  # 1970: not a time a person would read
    assert not is_time_column("cards", [T]) and not is_time_column("decided_at", [None])


def test_sql_table_renders_epoch_columns_and_aligns_numbers():
    out = sql_table(["task_id", "decided_at", "cards"], [("a", T, 8), ("bb", None, 16)])
    assert out.splitlines() == ["task_id  decided_at            cards",
                                "-------  --------------------  -----",
                                "a        2025-12-01 15:04:05Z      8",
                                "bb       -                        16"]


def record(status="queued", **extra):
    return {"task": {"id": "dp3", "type": "training-data-parallel", "team": "ml", "priority": 70,
                     "resources": {"cards": 8}, "peers": 2, "submitted_at": T, "expected_duration_s": 7200},
            "status": status, "nodes": [], "history": [
                {"decision": {"status": "unschedulable", "nodes": [], "decided_at": T, "alpha": 0.2,
                              "network_profile": "bandwidth", "rejected_counts": {"insufficient_cards": 2},
                              "candidates": [], "fallbacks": []}},
                {"event": {"event": "hold", "at": T + 60, "by": "ops", "reason": "maintenance"}}], **extra}


def test_a_queued_task_listed_and_described():
    est = {"basis": "1 node can take a worker now; it needs 2 with 8 free cards each", "reason": "resources",
           "position": 3}
    rec = record(estimate=est)
    assert task_row(rec, T + 192) == ("dp3", "ml", "training-data-parallel", 70, "queued", "-", "3m12s",
                                      "resources: 1 node can take a worker now; it needs 2 with 8 free cards ",
                                      "3m12s")
    text = describe_task(rec, T + 192)
    assert "Submitted:    2025-12-01 15:04:05Z (3m12s ago)" in text.splitlines()
    assert "Waiting for:  resources: 1 node can take a worker now; it needs 2 with 8 free cards each" in text
    assert "Position:     3 in the queue" in text.splitlines()
    assert "Rejected: insufficient_cards x2" in text
    assert "2025-12-01 15:05:05Z  hold      by ops; maintenance" in text


def test_a_node_listed_and_described():
    node = {"node": "n1", "class": "gpu", "available": True, "state": "up", "cards": 8, "cards_booked": 4,
            "cards_reported_free": 6, "cards_free": 4, "tasks": ["a"], "age_s": 3.2, "last_seen": T,
            "first_seen": T - 86400, "compute_score": {"training": 88.04},
            "report": {"zone": "eu-dc1", "region": "eu", "rack": "r1"}}
    assert node_row(node) == ("n1", "eu-dc1", "r1", "gpu", 8, 4, 6, 4, "up", "3s", 1, "-")
    assert node_row({**node, "state": "cordoned", "state_reason": "cordon by ops at 2026-12-04 10:00Z: fan"})[-1] == \
        "cordon by ops at 2026-12-04 10:00Z: fan"
    text = describe_node(node, {"mean_quality_to_peers": 91.25, "peers": 3, "bw_util": 0.4}, T)
    assert "Cards:         8 (4 booked by cnsched, 6 free by its report, 4 free to place)" in text.splitlines()
    assert "Network:       mean quality to 3 peers 91.2; NIC utilisation 0.40" in text.splitlines()
