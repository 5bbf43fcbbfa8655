"""The network answers built from the view's records, without a server."""

import pytest

from streams.web.network import network_index, node_answer, path_answer

NOW = 1_732_860_000.0


def win(metric, **stats):
    base = {"window_start": NOW - 15, "window_end": NOW - 5, "count": 100, "kept": 100, "outliers": 0, "lost": 0,
            "mean": None, "p50": None, "p95": None, "p99": None, "min": None, "max": None}
    return metric, {**base, **stats}


def rec(src, dst, *metrics):
    return {"src": src, "dst": dst, "metrics": dict(metrics)}


class View:
    def __init__(self, records):
        self._r = records

    def records(self):
        return self._r


def test_path_and_node_answers_worked_example():
    # p95 90 ms -> 18.821; loss 1/100 -> 80; bw_util max(0.65 at a, 0.2 at b) -> 50; retrans 0 -> 100;
    # jitter 5 ms -> 33.333; balanced: 49.087 (tests/core/test_quality.py works it out)
    ab = rec("a", "b", win("rtt_ms", p50=85.0, p95=90.0, lost=1))
    ac = rec("a", "c", win("rtt_ms", p50=0.2, p95=0.3))
    local = {"a": rec("a", "", win("bw_util", mean=0.65), win("retrans_rate", mean=0.0)),
             "b": rec("b", "", win("bw_util", mean=0.2))}
    p = path_answer(ab, local, NOW)
    assert p.inputs == {"p95_rtt_ms": 90.0, "loss": 0.01, "bw_util": 0.65, "retrans": 0.0, "jitter_ms": 5.0}
    assert p.quality == pytest.approx(49.087, abs=1e-3) and p.age_s == pytest.approx(5.0)
    loc, by_src = network_index(View(list(local.values()) + [ab, ac]))
    n = node_answer("a", loc["a"], by_src["a"], loc, NOW)
    good = path_answer(ac, local, NOW).quality
    assert (n.bw_util, n.peers, n.worst_peer) == (0.65, 2, "b")
    assert n.mean_quality_to_peers == pytest.approx((p.quality + good) / 2, abs=1e-4)
    lonely = node_answer("z", None, [], loc, NOW)
    assert lonely.mean_quality_to_peers is None and lonely.worst_peer is None and lonely.age_s is None
