

def test_set_many_writes_what_set_writes_per_record():
    import numpy as np

    from streams.adapters.network import PathColumns

    def win(p95, lost, count, end):
        return {"window_start": end - 10, "window_end": end, "count": count, "kept": count - lost, "outliers": 0,
                "lost": lost, "mean": p95, "p50": p95 / 2, "p95": p95, "p99": p95, "min": 0.0, "max": p95}

    one, many = PathColumns(), PathColumns()
    for cols in (one, many):  # an existing path, updated below, and new ones
        cols.set({"src": "a", "dst": "b", "metrics": {"rtt_ms": win(9.0, 0, 10, 5.0)}})
    src, dst = ["a", "rack:x", "store"], ["b", "rack:y", "rack:x"]
    p95, lost, count, util = [1.0, 2.0, 3.0], [0, 5, 1], [100, 100, 50], [0.1, 0.5, 0.0]
    for k in range(3):
        one.set({"src": src[k], "dst": dst[k], "metrics": {
            "rtt_ms": win(p95[k], lost[k], count[k], 20.0), "bw_util": {**win(util[k], 0, 1, 20.0), "mean": util[k]}}})
    many.set_many(src, dst, {"p95": np.array(p95), "p50": np.array(p95) / 2, "lost": np.array(lost),
                             "count": np.array(count), "bw_util": np.array(util), "end": np.full(3, 20.0)})
    assert one.rows == many.rows and one.names == many.names
    for f, _, _ in PathColumns.FIELDS:
        np.testing.assert_array_equal(one.cols[f][:one.n], many.cols[f][:many.n], err_msg=f)
