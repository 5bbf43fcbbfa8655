import math

import numpy as np
import pytest

from core.windowstats import window_stats_reference
from schemas.probe import decode_samples, encode_arrow
from streams.worker.panes import decode_mark, decode_pane, encode_mark, encode_pane
from streams.worker.windowing import PartitionWindows


def batch(ts, values, dst="b", src="a", metric="rtt_ms"):
    n = len(ts)
    return decode_samples(encode_arrow(ts, [src] * n, [dst] * n, [metric] * n, values))


def test_windows_close_by_event_time_and_late_samples_are_counted():
    w = PartitionWindows(size_s=10, step_s=10, lateness_s=2)
    assert w.add(batch([100.0, 101.0, 105.0], [1.0, 2.0, 3.0])) == 0
    assert w.close_ready() == []  # watermark 103: window [100, 110) still open
    w.add(batch([111.0], [4.0]))
    assert w.close_ready() == []  # watermark 109
    w.add(batch([112.5], [5.0]))  # watermark 110.5: [100, 110) is final
    (res,) = w.close_ready()
    assert (res["window_start"], res["window_end"], res["count"]) == (100.0, 110.0, 3)
    assert res["mean"] == 2.0 and res["min"] == 1.0 and res["max"] == 3.0
    assert w.add(batch([109.0], [9.0])) == 1  # too late for the closed window
    w.add(batch([130.0], [1.0]))
    (res2,) = w.close_ready()
    assert res2["window_start"] == 110.0 and res2["count"] == 2  # the late 109.0 is not in it
    assert w.late_samples == 1


def test_advancing_event_time_closes_the_windows_of_an_idle_partition():
    w = PartitionWindows(size_s=10, step_s=10, lateness_s=2)
    w.add(batch([100.0, 104.0], [1.0, 3.0]))
    assert w.close_ready() == []  # no sample since: without help the window would stay open
    w.advance(111.0)
    assert w.close_ready() == []  # watermark 109
    w.advance(105.0)  # never backwards
    assert w.mark.max_ts == 111.0
    w.advance(112.0)
    (res,) = w.close_ready()
    assert (res["window_start"], res["count"], res["mean"]) == (100.0, 2, 2.0)
    assert w.add(batch([108.0], [5.0])) == 1  # a sample for the closed window is late


def test_hopping_windows_merge_panes():
    # size 10, step 5 -> panes of 5 s; a sample at 107 is in windows [100,110) and [105,115)
    w = PartitionWindows(size_s=10, step_s=5, lateness_s=0)
    w.add(batch([101.0, 107.0, 112.0], [1.0, 2.0, 4.0]))
    res = {r["window_start"]: r for r in w.flush_all()}
    assert sorted(res) == [95.0, 100.0, 105.0, 110.0]
    assert (res[95.0]["count"], res[100.0]["count"], res[105.0]["count"], res[110.0]["count"]) == (1, 2, 2, 1)
    assert res[100.0]["mean"] == 1.5 and res[105.0]["mean"] == 3.0


def test_matches_exact_statistics_within_sketch_accuracy():
    rng = np.random.default_rng(3)
    ts = 1e9 + np.sort(rng.uniform(0, 30, 30000))
    v = rng.lognormal(np.log(0.3), 0.25, ts.size)
    spikes = rng.random(ts.size) < 0.03
    v[spikes] *= rng.uniform(10, 100, spikes.sum())
    v[rng.random(ts.size) < 0.01] = np.nan
    w = PartitionWindows(10, 10, 1)
    for a in range(0, ts.size, 1000):
        w.add(batch(ts[a:a + 1000], v[a:a + 1000]))
    results = w.flush_all()
    assert len(results) == 3
    for r in results:
        inside = (ts >= r["window_start"]) & (ts < r["window_end"])
        e = window_stats_reference(v[inside])
        assert (r["count"], r["lost"]) == (e["count"], e["lost"])
        assert r["outliers"] >= int((spikes & inside).sum())  # every clear spike is an outlier
        assert abs(r["outliers"] - e["outliers"]) <= 0.002 * e["count"]
        assert r["mean"] == pytest.approx(e["mean"], rel=0.005)
        for f in ("p50", "p95", "p99"):
            assert r[f] == pytest.approx(e[f], rel=0.01), f


def test_results_do_not_depend_on_how_samples_are_split_into_messages():
    rng = np.random.default_rng(1)
    ts = np.sort(rng.uniform(0, 50, 2000)) + 1e9
    vals = rng.lognormal(0, 0.3, ts.size)
    whole = PartitionWindows(10, 5, 3)
    whole.add(batch(ts, vals))
    expected = whole.flush_all()
    assert len(expected) == 11  # hopping: starts 999999995 .. 1000000045 every 5 s
    split = PartitionWindows(10, 5, 3)
    emitted = []
    for a in range(0, ts.size, 137):
        assert split.add(batch(ts[a:a + 137], vals[a:a + 137])) == 0
        emitted += split.close_ready()
    emitted += split.flush_all()
    assert [r["window_start"] for r in emitted] == [r["window_start"] for r in expected]
    for got, exp in zip(emitted, expected, strict=True):
        assert {k: v for k, v in got.items() if k != "mean"} == {k: v for k, v in exp.items() if k != "mean"}
        assert got["mean"] == pytest.approx(exp["mean"], rel=1e-12)


def test_replayed_messages_are_applied_once():
    w = PartitionWindows(10, 10, 0)
    w.add(batch([100.0, 101.0], [1.0, 3.0]), offset=7)
    w.add(batch([100.5, 102.0], [1.0, 3.0]), offset=7)  # the same offset again: skipped
    w.add(batch([103.0], [2.0]), offset=8)
    (r,) = w.flush_all()
    assert r["count"] == 3 and r["mean"] == 2.0
    assert w.replayed_samples == 2


def test_a_replayed_message_whose_windows_closed_is_replayed_not_late():
    """Issue 55: after a restart the consumer reads again from its committed offset; a message whose
    windows closed meanwhile counted as late, so every restart looked like a burst of late data."""
    w = PartitionWindows(size_s=10, step_s=10, lateness_s=2)
    w.add(batch([100.0, 101.0], [1.0, 3.0]), offset=7)
    w.add(batch([115.0], [2.0]), offset=8)
    (closed,) = w.close_ready()  # [100, 110) is out
    assert closed["count"] == 2
    assert w.add(batch([100.0, 101.0], [1.0, 3.0]), offset=7) == 0  # read again: not late
    assert (w.late_samples, w.replayed_samples) == (0, 2)
    assert w.add(batch([105.0], [9.0]), offset=9) == 1  # a new message for the closed window is late
    assert (w.late_samples, w.replayed_samples) == (1, 2)


def test_persist_and_restore_round_trip_gives_the_same_results():
    rng = np.random.default_rng(9)
    ts = np.sort(rng.uniform(0, 40, 4000)) + 1e9
    v = rng.lognormal(0, 0.5, ts.size)
    v[::97] = np.nan
    live = PartitionWindows(10, 10, 2)
    crashed = PartitionWindows(10, 10, 2)
    out_live, out_crashed = [], []
    for i, a in enumerate(range(0, ts.size, 500)):
        b = batch(ts[a:a + 500], v[a:a + 500])
        live.add(b, offset=i)
        out_live += live.close_ready()
        crashed.add(b, offset=i)
        out_crashed += crashed.close_ready()
        if i == 3:
            mark, panes, dropped = crashed.take_changes()
            stored = {k: encode_pane(decode_pane(x)) for k, x in panes.items()}
            mark = decode_mark(encode_mark(mark))
    # crash after message 5: restore the state persisted after message 3, replay 2..7
    restored = PartitionWindows(10, 10, 2)
    restored.restore(mark, stored)
    out_restored = [r for r in out_crashed if r["window_end"] <= mark.closed_before]
    for i, a in enumerate(range(0, ts.size, 500)):
        if i >= 2:
            restored.add(batch(ts[a:a + 500], v[a:a + 500]), offset=i)
            out_restored += restored.close_ready()
    out_live += live.flush_all()
    out_restored += restored.flush_all()

    def norm(rs):
        return sorted((r["window_start"], r["count"], r["lost"], r["kept"], round(r["mean"], 9), r["p99"]) for r in rs)

    assert norm(out_restored) == norm(out_live)
    assert restored.replayed_samples > 0


def test_pane_wire_format_round_trip_and_size():
    w = PartitionWindows(10, 10, 0)
    w.add(batch(np.full(1000, 100.0), np.linspace(1, 2, 1000)), offset=42)
    _, panes, _ = w.take_changes()
    (data,) = panes.values()
    p = decode_pane(data)
    assert (p.applied_offset, p.count, p.lost, p.vmin, p.vmax) == (42, 1000, 0, 1.0, 2.0)
    n = p.keys[0].size
    assert len(data) == 45 + 18 * n and n <= math.ceil(math.log(2) / math.log(1.01005)) + 1
    assert int(p.counts[0].sum()) == 1000


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(1, 400), min_size=1, max_size=8), st.floats(0, 2.9))
def test_results_do_not_depend_on_splitting_or_order_within_the_lateness(seed, cuts, jitter):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, 40, 1200)) + 1e9
    vals = rng.lognormal(0, 0.4, ts.size)
    vals[rng.random(ts.size) < 0.01] = np.nan
    ref = PartitionWindows(10, 5, 3)
    ref.add(batch(ts, vals))
    expected = ref.flush_all()
    # shuffle: each sample moves earlier in arrival order by less than the lateness
    arrival = ts - rng.uniform(0, jitter, ts.size)
    order = np.argsort(arrival, kind="stable")
    w = PartitionWindows(10, 5, 3)
    out, a, i = [], 0, 0
    while a < ts.size:
        b = a + cuts[i % len(cuts)]
        sl = order[a:b]
        assert w.add(batch(ts[sl], vals[sl])) == 0
        out += w.close_ready()
        a, i = b, i + 1
    out += w.flush_all()
    assert [(r["window_start"], r["count"], r["lost"], r["kept"], r["p99"]) for r in out] == [
        (r["window_start"], r["count"], r["lost"], r["kept"], r["p99"]) for r in expected
    ]
    for got, exp in zip(out, expected, strict=True):
        assert got["mean"] == pytest.approx(exp["mean"], rel=1e-12)


def test_a_group_of_messages_is_late_exactly_as_one_by_one():
    w = PartitionWindows(10, 10, 2)
    late = w.add_many([batch([101.0], [1.0]), batch([130.0], [1.0]), batch([102.0], [5.0])], [0, 1, 2])
    assert late == 1  # 102 arrives after 130 moved the watermark past [100, 110)
    (first, second) = w.flush_all()
    assert (first["window_start"], first["count"], first["mean"]) == (100.0, 1, 1.0)
    assert second["window_start"] == 130.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(1, 6), min_size=1, max_size=6), st.floats(0, 8))
def test_grouping_messages_gives_the_one_by_one_results(seed, groups, jitter):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, 60, 900)) + 1e9
    arrival = ts - rng.uniform(0, jitter, ts.size)  # jitter beyond the lateness: some samples late
    order = np.argsort(arrival, kind="stable")
    msgs = [batch(ts[order[a:a + 30]], np.ones(len(order[a:a + 30]))) for a in range(0, ts.size, 30)]
    one = PartitionWindows(10, 10, 3)
    out_one, late_one = [], 0
    for i, m in enumerate(msgs):
        late_one += one.add(m, i)
        out_one += one.close_ready()
    out_one += one.flush_all()
    grouped = PartitionWindows(10, 10, 3)
    out_g, late_g, i, k = [], 0, 0, 0
    while i < len(msgs):
        n = groups[k % len(groups)]
        late_g += grouped.add_many(msgs[i:i + n], list(range(i, i + n)))
        out_g += grouped.close_ready()
        i, k = i + n, k + 1
    out_g += grouped.flush_all()
    assert late_g == late_one
    assert [(r["window_start"], r["count"]) for r in out_g] == [(r["window_start"], r["count"]) for r in out_one]


@pytest.mark.parametrize("groups", [
    [[0, 1, 2], [2, 3, 4]],  # the last message of a group delivered again at the head of the next
    [[0, 1, 2], [1, 2]],  # delivered again, nothing new
    [[0, 1], [2, 3, 3]],  # twice within one group
    [[0, 1, 2], [0, 1, 2, 3, 4]],  # a replay from an earlier offset (a partition read again)
])
def test_a_message_delivered_twice_counts_once_and_takes_nothing_from_its_neighbours(groups):
    """The embedded broker re-delivers a partition's last record. In a group, a duplicate was merged
    with its neighbours under the group's last offset: counted twice (+1), or, when it came last, the
    panes that held it skipped its neighbours' samples (-1) (issue 15, SIGKILL at one sample per message)."""
    msgs = [batch([100.0 + i], [float(i + 1)]) for i in range(5)]
    w = PartitionWindows(10, 10, 1)
    for g in groups:
        w.add_many([msgs[o] for o in g], g)
    (r,) = w.flush_all()
    delivered = sorted({o for g in groups for o in g})
    assert r["count"] == len(delivered)
    assert r["mean"] == pytest.approx(np.mean([o + 1.0 for o in delivered]))


def test_a_big_first_message_keeps_every_sample_under_its_own_series_and_window():
    """Issue 32, finding 2: many names and panes far apart made the (series, pane) code overflow
    int64, and samples came out under another series, hours earlier. 2^16 sources x 2^16
    destinations x 2^10 metrics x 2^22 panes is 2^64 codes; each sample must still land where it is."""
    from schemas.probe import ProbeBatch

    names = [f"n{i}" for i in range(2**16)]
    metrics = ["rtt_ms"] + [f"m{i}" for i in range(2**10 - 1)]
    t0 = 1.7e9
    ts = np.array([t0, t0 + 5.0, t0 + 10.0 * (2**22 - 1), t0 + 10.0 * 2**21])
    b = ProbeBatch(ts, np.array([1.0, 2.0, 3.0, 4.0]), np.array([65535, 65535, 0, 12345], np.int32),
                   np.array([1, 1, 65535, 4242], np.int32), np.array([0, 0, 1023, 7], np.int32),
                   names, names, metrics)
    w = PartitionWindows(size_s=10, step_s=10, lateness_s=1)
    w.add(b)
    got = sorted((r["src"], r["dst"], r["metric"], r["window_start"], r["count"], r["max"]) for r in w.flush_all())
    assert got == sorted([
        ("n65535", "n1", "rtt_ms", t0, 2, 2.0),
        ("n0", "n65535", "m1022", t0 + 10.0 * (2**22 - 1), 1, 3.0),
        ("n12345", "n4242", "m6", t0 + 10.0 * 2**21, 1, 4.0),
    ])


def test_a_sample_far_ahead_of_the_clock_is_refused_and_the_valid_samples_behind_it_stay_on_time():
    """Issue 32, finding 3: with the default settings a sample 290 s ahead of the worker's clock was
    accepted, moved its partition's event time on by 290 s, and the next five minutes of valid
    samples were dropped as late, without a dead letter. With the worker's own check (the settings'
    skew, the default lateness) it is refused with its reason and every valid sample counts."""
    from schemas.probe_validation import validate_batch
    from streams.config import Settings

    cfg = Settings()
    now = 1.8e9
    w = PartitionWindows(cfg.window_seconds, cfg.window_step_seconds, cfg.allowed_lateness_seconds)
    ahead = validate_batch(batch([now + 290.0], [1.0]), now, cfg.max_clock_skew_seconds, cfg.max_sample_age_seconds)
    assert len(ahead.good) == 0 and ahead.rejected == {"out_of_range": 1}
    assert "clock skew" in ahead.listed[0].detail
    late = w.add(ahead.good, 0)
    valid_ts = now + np.arange(0.0, 60.0, 0.5)  # a minute of valid samples, each checked at its arrival
    for i, t in enumerate(valid_ts):
        check = validate_batch(batch([t], [2.0]), t, cfg.max_clock_skew_seconds, cfg.max_sample_age_seconds)
        late += w.add(check.good, i + 1)
    assert late == 0
    assert sum(r["count"] for r in w.flush_all()) == valid_ts.size
    # the skew a sample is still accepted within bounds what it can make late: no more than the skew
    # minus the lateness behind it
    assert cfg.max_clock_skew_seconds - cfg.allowed_lateness_seconds <= 10.0
