"""The scheduler's path table from columns (numpy) against a plain record-by-record reference, on random network views: missing metrics, reverse-only paths, node-local records,
endpoints that are not nodes, updates after the columns were built."""

import math

import numpy as np
import pytest

from core.quality import DEFAULT_MODEL, combine, dimension_utilities
from streams.worker.scheduling.path_table import build_path_table
from streams.worker.scheduling.state import Scheduler
from streams.worker.state_tables import NetState


def _stat(rec, metric, field):
    m = (rec or {}).get("metrics", {}).get(metric)
    v = None if m is None else m.get(field)
    return math.nan if v is None else float(v)


def path_inputs(paths, nodes):
    """Plain reference: one path at a time from its record (what the columns must reproduce)."""
    n = len(paths)
    out = {k: np.full(n, np.nan) for k in ("p95_rtt_ms", "loss", "bw_util", "retrans", "jitter_ms")}
    for i, p in enumerate(paths):
        p95, p50 = _stat(p, "rtt_ms", "p95"), _stat(p, "rtt_ms", "p50")
        out["p95_rtt_ms"][i], out["jitter_ms"][i] = p95, p95 - p50
        m = p["metrics"].get("rtt_ms")
        probe = m["lost"] / m["count"] if m and m.get("count") else math.nan
        out["loss"][i] = np.fmax(probe, _stat(p, "loss_rate", "mean"))
        for col, metric in (("bw_util", "bw_util"), ("retrans", "retrans_rate")):
            v = _stat(p, metric, "mean")
            if math.isnan(v):
                v = np.fmax(_stat(nodes.get(p["src"]), metric, "mean"), _stat(nodes.get(p["dst"]), metric, "mean"))
            out[col][i] = v
    return out


def reference_table(records, node_ids, profile):
    index = {x: i for i, x in enumerate(node_ids)}
    local = {r["src"]: r for r in records if r["dst"] == ""}
    paths = [r for r in records if r["dst"]]
    present = {(r["src"], r["dst"]) for r in paths}
    x = path_inputs(paths, local)
    u = dimension_utilities(x["p95_rtt_ms"], x["loss"], x["bw_util"], x["retrans"], x["jitter_ms"])
    q = combine(u, DEFAULT_MODEL.weights(profile)).astype(np.float32)
    by_ep, node_sum, node_cnt = {}, np.zeros(len(node_ids)), np.zeros(len(node_ids))
    for row, r in enumerate(paths):
        for node, ep in ((r["src"], r["dst"]), (r["dst"], r["src"])):
            col = index.get(node)
            if col is None or ((node, ep) != (r["src"], r["dst"]) and (node, ep) in present):
                continue
            by_ep.setdefault(ep, set()).add((col, (r["src"], r["dst"])))
            if not math.isnan(q[row]):
                node_sum[col] += q[row]
                node_cnt[col] += 1
    util = []
    for node in node_ids:
        m = (local.get(node) or {}).get("metrics", {}).get("bw_util")
        util.append(math.nan if not m or m.get("mean") is None else m["mean"])
    util = np.array(util)
    return {"paths": [(r["src"], r["dst"]) for r in paths], "q": q, "p95": x["p95_rtt_ms"], "loss": x["loss"],
            "by_ep": by_ep, "node_q": np.where(node_cnt > 0, node_sum / np.maximum(node_cnt, 1), np.nan),
            "headroom": np.where(np.isnan(util), 1.0, 1.0 - util)}


def window(rng, **over):
    p95 = float(rng.uniform(0.1, 300))
    w = {"window_start": 0.0, "window_end": 10.0, "count": int(rng.integers(0, 200)), "kept": 1, "outliers": 0,
         "lost": 0, "mean": p95 / 2, "p50": p95 * 0.8, "p95": p95, "p99": p95, "min": 0.0, "max": p95}
    w["lost"] = int(rng.integers(0, w["count"] + 1)) if w["count"] else 0
    if rng.random() < 0.1:
        w["p95"] = None
    w.update(over)
    return w


def random_records(rng, names):
    recs = {}
    for s in names:
        if rng.random() < 0.6:  # node-local metrics
            recs[(s, "")] = {"src": s, "dst": "", "metrics": {
                m: window(rng, mean=float(rng.uniform(0, 1))) for m in ("bw_util", "retrans_rate") if rng.random() < 0.8}}
        for d in names + ["store1", "store2"]:
            if d != s and rng.random() < 0.35:
                metrics = {}
                if rng.random() < 0.9:
                    metrics["rtt_ms"] = window(rng)
                for m in ("loss_rate", "bw_util", "retrans_rate"):
                    if rng.random() < 0.3:
                        metrics[m] = window(rng, mean=float(rng.uniform(0, 0.5)))
                recs[(s, d)] = {"src": s, "dst": d, "metrics": metrics}
    return recs


def compare(sched, records, node_ids, profile):
    got = vars(build_path_table(sched.net.columns(), node_ids, profile))
    want = reference_table(list(records), node_ids, profile)
    cols = sched.net.columns()
    rows, _ = cols.path_inputs()
    got_paths = [(cols.names[cols.src[r]], cols.names[cols.dst[r]]) for r in rows]
    order = [got_paths.index(p) for p in want["paths"]]  # same paths, maybe another order
    assert sorted(got_paths) == sorted(want["paths"])
    for k in ("q", "p95", "loss"):
        np.testing.assert_allclose(got[k][order], want[k], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(got["node_q"], want["node_q"], rtol=1e-5, equal_nan=True)
    np.testing.assert_allclose(got["headroom"], want["headroom"], equal_nan=True)
    got_ep = {ep: {(int(c), got_paths[int(r)]) for c, r in zip(cs, rs, strict=True)} for ep, (cs, rs) in got["by_ep"].items()}
    assert got_ep == want["by_ep"]


def every_node_as_endpoint(pt, node_ids):
    """PathTable.node_matrix (every node's row at once, as a gang's member-pair qualities read them)
    is the gather of every node, value for value, in each column and type, and served again."""
    for name, dtype in (("q", np.float32), ("q", np.float64), ("p95", np.float64), ("loss", np.float64),
                        ("end", np.float64)):
        got = pt.node_matrix(name, node_ids, dtype)
        want = pt.gather(name, node_ids, len(node_ids), dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert pt.node_matrix(name, node_ids, dtype) is got
    with pytest.raises(ValueError):
        pt.node_matrix("shift", node_ids)
    # PathTable.among (a gang's member pairs, without full rows): the same values on any members
    rng = np.random.default_rng(len(node_ids))
    n = len(node_ids)
    for members in (np.arange(n), np.arange(n)[::-1], rng.permutation(n)[: max(n // 2, 1)], np.zeros(0, np.int64)):
        for name in ("p95", "loss", "end"):
            want = pt.gather(name, [node_ids[m] for m in members], n)[:, members]
            np.testing.assert_array_equal(pt.among(name, members, node_ids), want, err_msg=name)
    # sets of members at once ([K, g]: each set's pairs, [K, g, g]), as a gang's candidate sets read them
    sets = rng.integers(0, n, (5, min(n, 3)))
    for name in ("p95", "loss"):
        got = pt.among(name, sets, node_ids)
        assert got.shape == (5, sets.shape[1], sets.shape[1])
        for k in range(5):
            np.testing.assert_array_equal(got[k], pt.gather(name, [node_ids[m] for m in sets[k]], n)[:, sets[k]])
    with pytest.raises(ValueError):
        pt.among("shift", np.arange(n), node_ids)


@pytest.mark.parametrize("seed", range(6))
def test_columnar_path_table_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    names = [f"n{i}" for i in range(12)]
    recs = random_records(rng, names)
    table = {f"{s}|{d}".encode(): __import__("json").dumps(r).encode() for (s, d), r in recs.items()}
    net = NetState(table)
    sched = Scheduler(net, inv=None)
    node_ids = names[:10] + ["ghost"]  # two named in paths are not nodes; one node has no paths
    profile = ["balanced", "latency", "bandwidth"][seed % 3]
    compare(sched, net.records(), node_ids, profile)
    every_node_as_endpoint(build_path_table(sched.net.columns(), node_ids, profile), node_ids)
    # updates after the columns exist: changed windows and a new path
    for (s, d), r in list(recs.items())[:5]:
        r = {**r, "metrics": {**r["metrics"], "rtt_ms": window(rng)}}
        net.put(f"{s}|{d}".encode(), r)
    net.put(b"n0|store9", {"src": "n0", "dst": "store9", "metrics": {"rtt_ms": window(rng)}})
    compare(sched, net.records(), node_ids, profile)


def test_no_path_touches_a_known_node_yet():
    # a fresh cluster: the only window is between two nodes that have not reported compute yet
    net = NetState({b"a|b": __import__("json").dumps({"src": "a", "dst": "b", "metrics": {
        "rtt_ms": {"window_start": 0.0, "window_end": 10.0, "count": 10, "kept": 10, "outliers": 0, "lost": 0,
                   "mean": 1.0, "p50": 1.0, "p95": 2.0, "p99": 2.0, "min": 1.0, "max": 2.0}}}).encode()})
    pt = build_path_table(net.columns(), ["n0", "n1"], "balanced")
    assert pt.by_ep == {} and np.isnan(pt.node_q).all() and pt.gather("q", ["n0"], 2).shape == (1, 2)


def test_rack_level_paths_stand_for_the_nodes_behind_them():
    # n0, n1 in rack A, n2 in rack B, n3 reports no rack. Probes: A<->A (inside), A->B, B->A, the
    # store to both racks, and one node pair n0->n2 of its own (that one wins over the racks' path)
    def rec(src, dst, p95):
        return {"src": src, "dst": dst, "metrics": {"rtt_ms": {
            "window_start": 0.0, "window_end": 10.0, "count": 100, "kept": 100, "outliers": 0, "lost": 0,
            "mean": p95, "p50": p95, "p95": p95, "p99": p95, "min": p95, "max": p95}}}

    paths = [("rack:A", "rack:A", 0.05), ("rack:A", "rack:B", 40.0), ("rack:B", "rack:A", 40.0),
             ("store", "rack:A", 60.0), ("store", "rack:B", 0.3), ("n0", "n2", 5.0)]
    net = NetState({f"{s}|{d}".encode(): __import__("json").dumps(rec(s, d, v)).encode() for s, d, v in paths})
    ids = ["n0", "n1", "n2", "n3"]
    pt = build_path_table(net.columns(), ids, "balanced", node_racks=["rack:A", "rack:A", "rack:B", ""])
    p95 = pt.gather("p95", ["n0", "n1", "n2", "n3", "store"], 4)
    nan = np.nan
    np.testing.assert_array_equal(p95, [
        [0.05, 0.05, 5.0, nan],    # n0: its rack inside, its own pair to n2, n3 has no rack
        [0.05, 0.05, 40.0, nan],   # n1 -> n2 through the racks' path
        [5.0, 40.0, nan, nan],     # n2: n0's pair path serves the way back; rack B has none inside
        [nan, nan, nan, nan],      # no rack: nothing stands for it
        [60.0, 60.0, 0.3, nan],    # the store towards each rack's nodes
    ])
    every_node_as_endpoint(pt, ids)  # racks' rows shared, n0's own pair, n3 without a rack
    q = pt.gather("q", ["rack:A"], 4)[0]
    # a node without node-level paths takes its rack's mean quality to the racks it probes
    assert pt.node_q[1] == pytest.approx(np.mean(q[[0, 2]]))
    assert np.isnan(pt.node_q[3])


def test_model_parallel_reads_both_directions():
    """The seed: model-parallel training needs bandwidth both ways. Its profile (duplex) scores a path
    at its worse direction; inference (latency) reads the node's own direction."""
    import time

    from schemas.sched import Task
    from tests.helpers.scheduling import gpu_node, make_scheduler, win

    now = time.time()
    # A -> peer is clean both ways for B; for A the way back (peer -> A) loses 4 % of its probes
    paths = {("A", "peer"): {"rtt_ms": win(now, 1.0)}, ("peer", "A"): {"rtt_ms": win(now, 1.0, lost=4)},
             ("B", "peer"): {"rtt_ms": win(now, 1.2)}, ("peer", "B"): {"rtt_ms": win(now, 1.2)}}
    s = make_scheduler([gpu_node("A", now), gpu_node("B", now)], paths)
    mp = Task(id="mp", type="training-model-parallel", resources={"cards": 8}, data_source={"node": "peer"},
              alpha=0.3)  # its data path matters all along (alpha given: the one-node rule would raise it)
    d = s.decide(mp, now)
    assert d.network_profile == "duplex" and d.nodes == ["B"]
    by = {c.node: c.network_score for c in d.candidates}
    assert by["A"] < by["B"] - 10  # A's worse way back counts
    s.end("mp")
    one_way = s.decide(mp.model_copy(update={"network_profile": "latency", "id": "lat"}), now)
    assert one_way.nodes == ["A"]  # A -> peer alone is the faster path


def test_the_losses_health_reads_are_the_path_tables_fresh_aging_and_stale():
    """path_losses (what failures.health reads, without a profile's quality) gives the path table's
    path_nodes and loss: a stale path's loss unknown, a fresh one's as measured."""
    from core.quality import Freshness
    from streams.adapters.network import PathColumns
    from streams.worker.scheduling.path_table import path_losses

    cols = PathColumns()
    ends = np.array([100.0, 40.0, -500.0, np.nan])  # fresh, aging, stale, no rtt window at all
    cols.set_many(["a", "b", "a", "c"], ["b", "a", "c", "a"],
                  {"p95": np.array([1.0, 2.0, 3.0, np.nan]), "p50": np.ones(4), "lost": np.array([0.0, 10, 50, 0]),
                   "count": np.array([100.0, 100, 100, np.nan]), "loss_rate": np.array([np.nan, np.nan, np.nan, 0.2]),
                   "end": ends})
    fr = Freshness(60.0, 300.0)
    for now, freshness in ((100.0, fr), (None, None), (10_000.0, fr)):
        pt = build_path_table(cols, ["a", "b", "c"], "balanced", now=now, freshness=freshness)
        paths, loss, observer, evidence = path_losses(cols, ["a", "b", "c"], now=now, freshness=freshness)
        assert [cols.names[o] for o in observer] == ["a", "b", "a", "c"] and evidence is None  # no rule given
        np.testing.assert_array_equal(paths, pt.path_nodes)
        np.testing.assert_array_equal(loss, pt.loss)
    _, loss, _, _ = path_losses(cols, ["a", "b", "c"], now=100.0, freshness=fr)
    assert loss[:2].tolist() == [0.0, 0.1] and math.isnan(loss[2]) and loss[3] == 0.2


def test_the_failure_evidence_of_each_path_and_quiet_paths_unknown():
    """With a failure rule, path_losses says which paths are evidence: enough probes in the latest
    window, a peer that answered in some window, a first window older than the grace; and a path whose
    latest window is more than the grace behind the newest path's is unknown (its prober went quiet)."""
    from core.failures import FailureRule
    from streams.adapters.network import PathColumns
    from streams.worker.scheduling.path_table import path_losses

    cols = PathColumns()
    src, dst = ["a", "b", "a", "c", "b"], ["b", "a", "c", "a", "c"]

    def put(end, lost, count):
        cols.set_many(src, dst, {"p95": np.ones(5), "p50": np.ones(5), "lost": np.array(lost, float),
                                 "count": np.array(count, float), "end": np.array(end, float)})

    put([100, 100, 100, 100, 100], [0, 10, 10, 0, 0], [10, 10, 10, 10, 10])  # a-c: every probe lost, never answered
    put([140, 140, 140, 140, 105], [10, 0, 10, 2, 0], [10, 10, 10, 2, 10])  # c-a: 2 probes; b-c quiet since 105
    rule = FailureRule(min_probes=3, grace_s=30.0)
    _, loss, _, evidence = path_losses(cols, ["a", "b", "c"], now=140.0, rule=rule)
    # a-b answered at 100 (lost now: evidence); b-a answered at 140; a-c never answered; c-a too few probes
    assert evidence.tolist() == [True, True, False, False, True]
    assert loss[:4].tolist() == [1.0, 0.0, 1.0, 1.0] and math.isnan(loss[4])  # b-c: 35 s behind the newest
    _, _, _, young = path_losses(cols, ["a", "b", "c"], now=129.0, rule=rule)
    assert not young.any()  # every first window (at 100) younger than the grace


@pytest.mark.parametrize("step_s", [0.0, 240.0])
def test_one_window_at_a_time_keeps_the_columns_as_the_vectorised_write_does(step_s):
    """PathColumns.set (one window result: plain Python) against set_many of the same record (numpy,
    the reference), record by record, and the columns parsed from all records at once against both:
    random windows of a few paths, ends older, newer and in the same detector step, counts with all or
    some probes lost, fields missing (NaN)."""
    from streams.adapters.network import PathColumns, stat

    rng = np.random.default_rng(int(step_s) + 1)
    one, ref = PathColumns(step_s=step_s), PathColumns(step_s=step_s)
    latest: dict = {}
    for _ in range(400):
        src, dst = f"r{rng.integers(0, 4)}", f"r{rng.integers(0, 4)}"
        m = {"window_end": float(rng.choice([1000.0, 1100.0, 1300.0, 1500.0, 1500.0 + rng.uniform(0, 900)]))}
        for field in ("p95", "p50", "count", "lost"):
            if rng.random() > 0.15:
                m[field] = float(rng.choice([0.0, 3.0, 10.0])) if field in ("count", "lost") else float(rng.uniform(1, 9))
        rec = {"src": src, "dst": dst, "metrics": {"rtt_ms": m} if rng.random() > 0.05 else {}}
        one.set(rec)
        values = {f: np.array([stat(rec, metric, which)]) for f, metric, which in PathColumns.FIELDS}
        ref.set_many([src], [dst], values)
        latest[(src, dst)] = rec
    parsed = PathColumns(list(latest.values()), step_s=step_s)  # only the latest of each path
    assert one.n == ref.n
    for name in ("hist", "hist_head", "hist_end", "hist_first", "hist_count", "answered_end"):
        np.testing.assert_array_equal(getattr(one, name)[:one.n], getattr(ref, name)[:ref.n], err_msg=name)
    for f in one.cols:
        np.testing.assert_array_equal(one.cols[f][:one.n], ref.cols[f][:ref.n], err_msg=f)
    seq = PathColumns(step_s=step_s)
    for rec in latest.values():
        seq.set(rec)
    for name in ("hist", "hist_end", "hist_first", "hist_count", "answered_end"):
        np.testing.assert_array_equal(getattr(parsed, name)[:parsed.n], getattr(seq, name)[:seq.n], err_msg=name)
    assert math.isfinite(float(np.nanmax(one.answered_end[:one.n])))
