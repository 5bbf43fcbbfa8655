

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


def test_the_shared_quality_inputs_are_fresh_after_every_write_and_give_each_profile_its_quality():
    """quality_inputs is remembered per write (every profile's table of a network version shares it):
    after a write of new values or a new path it must be what path_inputs and dimension_utilities
    give now, and each profile's path table quality what path_quality gives."""
    import numpy as np

    from core.quality import BOTH_WAYS, dimension_utilities, path_quality
    from core.vocabulary import NETWORK_PROFILES
    from streams.adapters.network import PathColumns
    from streams.worker.scheduling.path_table import build_path_table

    cols = PathColumns()
    src, dst = ["a", "b", "a"], ["b", "a", "c"]

    def write(p95, src=src, dst=dst):
        p95 = np.asarray(p95, float)
        cols.set_many(src, dst, {"p95": p95, "p50": p95 / 2, "lost": np.zeros(len(p95)),
                                 "count": np.full(len(p95), 100.0), "bw_util": np.full(len(p95), 0.3),
                                 "end": np.full(len(p95), 10.0)})

    seen = []
    for step in (lambda: write([1.0, 2.0, 300.0]), lambda: None, lambda: write([50.0, 2.0, 3.0]),
                 lambda: write([7.0], ["c"], ["a"])):  # new values, nothing, new values, a new path
        step()
        rows, x, u = cols.quality_inputs()
        want_rows, want = cols.path_inputs()
        np.testing.assert_array_equal(rows, want_rows)
        for k, v in want.items():
            np.testing.assert_array_equal(x[k], v, err_msg=k)
        np.testing.assert_array_equal(u, dimension_utilities(want["p95_rtt_ms"], want["loss"], want["bw_util"],
                                                             want["retrans"], want["jitter_ms"]))
        assert not u.flags.writeable  # shared: nobody may change it
        for profile in NETWORK_PROFILES:
            pt = build_path_table(cols, ["a", "b", "c"], profile)
            q = path_quality(want["p95_rtt_ms"], want["loss"], want["bw_util"], want["retrans"], want["jitter_ms"],
                             profile).astype(np.float32)
            if profile in BOTH_WAYS:
                continue  # both ways: the worse direction, checked by the path table's own tests
            np.testing.assert_array_equal(pt.q, q, err_msg=profile)
        seen.append(x["p95_rtt_ms"].tolist())
    assert seen[0] == seen[1] != seen[2] and len(seen[3]) == 4


def test_the_window_history_is_the_same_written_together_or_apart():
    """Every path's window at once (a range of rows) or one path at a time (rows picked out): the
    same history, counts and ends, through steps that add a window and steps that replace the newest,
    past the history's length (the ring goes round) — and the history is each path's last HISTORY
    windows of a step, oldest first, as a plain list kept per path gives them."""
    import numpy as np

    from streams.adapters.network import PathColumns

    paths = [("rack:a", "rack:b"), ("rack:b", "rack:a"), ("store", "rack:a"), ("rack:a", "rack:a")]
    src, dst = [p[0] for p in paths], [p[1] for p in paths]
    together, apart = PathColumns(step_s=60.0), PathColumns(step_s=60.0)
    rng = np.random.default_rng(3)
    end = 0.0
    plain = [[] for _ in paths]
    for k in range(PathColumns.HISTORY + 15):
        step = 60.0 if k % 3 else 20.0  # every third window falls in the step of the one before
        end += step
        p95 = rng.uniform(1, 100, len(paths)).astype(np.float32)
        for i in range(len(paths)):
            if plain[i] and step == 20.0 and (end // 60.0) == ((end - step) // 60.0):
                plain[i][-1] = p95[i]
            else:
                plain[i].append(p95[i])
        values = {"p95": p95, "p50": p95 / 2, "lost": np.zeros(4), "count": np.full(4, 100.0), "end": np.full(4, end)}
        together.set_many(src, dst, values)
        # apart: rows 0 and 2, then 3 and 1 (neither a range: picked out), or all four out of order
        for some in ([0, 2], [3, 1]) if k % 4 else ([3, 1, 0, 2],):
            apart.set_many([src[i] for i in some], [dst[i] for i in some], {f: v[some] for f, v in values.items()})
    a, b = together.rows_of(src, dst), apart.rows_of(src, dst)  # each path's row (created in another order)
    assert a.tolist() != b.tolist()
    np.testing.assert_array_equal(together.history(a), apart.history(b))
    assert together.hist_count[a].tolist() == apart.hist_count[b].tolist()
    assert together.hist_count[a].min() >= PathColumns.HISTORY - 5  # the history went round (past its start)
    H = PathColumns.HISTORY
    expected = np.array([np.r_[np.full(max(0, H - len(v)), np.nan), v[-H:]] for v in plain], np.float32)
    np.testing.assert_array_equal(together.history(a), expected)
    assert together.hist_count[a].tolist() == [min(len(v), H) for v in plain]
    np.testing.assert_array_equal(together.hist_end[a], apart.hist_end[b])


def test_set_records_of_a_step_with_repeated_paths_is_set_one_by_one():
    """A step of window results names a path several times (one per metric, or a newer window): the
    later must follow the earlier, as one by one — its columns and the detector's memory (each newer
    window of a newer step pushed, one of the same step over the newest place)."""
    import numpy as np

    from streams.adapters.network import PathColumns

    rng = np.random.default_rng(7)
    records = []
    for _ in range(300):
        end = float(rng.choice([100.0, 110.0, 130.0, 160.0, 160.0 + rng.uniform(0, 90)]))
        m = {"window_start": end - 10, "window_end": end, "p95": float(rng.uniform(1, 9)),
             "count": float(rng.choice([0.0, 5.0, 10.0])), "lost": float(rng.choice([0.0, 5.0]))}
        records.append({"src": f"r{rng.integers(0, 3)}", "dst": f"r{rng.integers(0, 3)}", "metrics": {"rtt_ms": m}})
    one, step = PathColumns(step_s=20.0), PathColumns(step_s=20.0)
    for rec in records:
        one.set(rec)
    for k in range(0, len(records), 50):  # steps of 50, each with repeats (9 paths)
        step.set_records(records[k:k + 50])
    assert one.rows == step.rows
    for name in ("hist", "hist_head", "hist_end", "hist_first", "hist_count", "answered_end"):
        np.testing.assert_array_equal(getattr(one, name)[:one.n], getattr(step, name)[:step.n], err_msg=name)
    for f in one.cols:
        np.testing.assert_array_equal(one.cols[f][:one.n], step.cols[f][:step.n], err_msg=f)
    assert int(one.hist_count[:one.n].max()) > 1  # windows of several steps were pushed
