import numpy as np

from schemas.probe import decode_samples, encode_arrow
from streams.windowing import WindowAccumulator


def batch(ts, values, dst="b"):
    n = len(ts)
    return decode_samples(encode_arrow(ts, ["a"] * n, [dst] * n, ["rtt_ms"] * n, values))


def test_windows_close_by_event_time_and_late_samples_are_counted():
    acc = WindowAccumulator(size_s=10, step_s=10, lateness_s=2)
    assert acc.add(batch([100.0, 101.0, 105.0], [1.0, 2.0, 3.0])) == 0
    assert acc.close_ready() == []  # watermark 103: window [100, 110) still open
    acc.add(batch([111.0], [4.0]))
    assert acc.close_ready() == []  # watermark 109
    acc.add(batch([112.5], [5.0]))  # watermark 110.5: [100, 110) is final
    (res,) = acc.close_ready()
    assert (res["window_start"], res["window_end"], res["count"], res["mean"]) == (100.0, 110.0, 3, 2.0)
    assert acc.add(batch([109.0], [9.0])) == 1  # too late for the closed window
    acc.add(batch([130.0], [1.0]))
    (res2,) = acc.close_ready()
    assert res2["window_start"] == 110.0 and res2["count"] == 2  # the late 109.0 is not in it
    assert acc.late_samples == 1


def test_results_do_not_depend_on_how_samples_are_split_into_messages():
    rng = np.random.default_rng(1)
    ts = np.sort(rng.uniform(0, 50, 2000)) + 1e9
    vals = rng.lognormal(0, 0.3, ts.size)
    whole = WindowAccumulator(10, 5, 3)
    whole.add(batch(ts, vals))
    split = WindowAccumulator(10, 5, 3)
    emitted = []
    for a in range(0, ts.size, 137):
        assert split.add(batch(ts[a:a + 137], vals[a:a + 137])) == 0
        emitted += split.close_ready()
    emitted += split.flush_all()
    expected = whole.flush_all()
    assert len(expected) == 11  # hopping: starts 999999995 .. 1000000045 every 5 s

    def key(r):
        return r["window_start"]

    assert sorted(emitted, key=key) == sorted(expected, key=key)
