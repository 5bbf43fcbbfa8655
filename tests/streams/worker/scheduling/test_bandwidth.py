"""Bandwidth booked by placements (streams/worker/scheduling/bandwidth.py, issue 53): what a placement
will send across a path counts against that path for the decisions after it until a probe window can
see it; numbers by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.ect import TRAINING_COMM_SHARE, run_seconds
from schemas.sched import Task
from streams.worker.scheduling.bandwidth import PathBook, booked_between, booked_from, left
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NOW = 1_000_000.0
E1, E2 = "rack:east/e1", "rack:east/e2"


def gbps(end: float, value: float) -> dict:
    """A bw_gbps window result: the median throughput ``value``."""
    return {"window_start": end - 10, "window_end": end, "count": 5, "kept": 5, "outliers": 0, "lost": 0,
            "mean": value, "p50": value, "p95": value, "p99": value, "min": value, "max": value}


def test_left_and_lookups_worked_examples():
    np.testing.assert_allclose(left([10.0, 10.0, 0.0], [4.0, 12.0, 1.0]), [6.0, 0.5, 0.0])
    book = {(E1, E2): 3.0, (E2, E1): 1.0, ("store.west", E1): 8.0, ("store.west", "rack:x"): 2.0}
    code = {E1: 0, E2: 1}
    np.testing.assert_allclose(booked_between(book, code, [0, 1, 0, -1], [1, 0, 0, 1]), [3.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(booked_from(book, "store.west", code, [0, 1, -1, 0]), [8.0, 0.0, 0.0, 8.0])
    assert booked_between({}, code, [0], [1]).tolist() == [0.0]


def data_cluster(e1_gbps: float = 8.0, e2_gbps: float = 4.0):
    """Racks e1 (n0-n3) and e2 (n4-n7) in one site, the data at store.west 20 ms away: its path to e1
    measures 8 Gbit/s, to e2 4 Gbit/s."""
    nodes = [gpu_node(f"n{i}", NOW, rack="e1" if i < 4 else "e2", region="east") for i in range(8)]
    paths = {(a, b): {"rtt_ms": win(NOW, 0.05 if a == b else 0.2)} for a in (E1, E2) for b in (E1, E2)}
    paths[("store.west", E1)] = {"rtt_ms": win(NOW, 20.0), "bw_gbps": gbps(NOW, e1_gbps)}
    paths[("store.west", E2)] = {"rtt_ms": win(NOW, 20.0), "bw_gbps": gbps(NOW, e2_gbps)}
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = math.inf, None
    return s


def loader(tid: str, peers: int = 2) -> Task:
    return Task(id=tid, type="training-data-parallel", peers=peers, resources={"cards": 8}, submitted_at=NOW,
                expected_duration_s=3600.0, data_source={"node": "store.west", "size_gb": 500})


def test_two_gangs_in_one_pass_do_not_both_count_on_the_same_free_bandwidth(monkeypatch):
    # g1: 500 GB over 8 Gbit/s = 500 s to e1 against 1,000 s to e2: e1. It books 8 Gbit/s on
    # store.west -> e1 for its load. g2 then reads max(8 - 8, 5 % of 8) = 0.4 Gbit/s there (10,000 s)
    # against 1,000 s to e2: e2, although e1 still has room for it.
    s = data_cluster()
    d1, d2 = s.decide_many([loader("g1"), loader("g2")], NOW)
    assert set(d1.nodes) <= {"n0", "n1", "n2", "n3"} and set(d2.nodes) <= {"n4", "n5", "n6", "n7"}
    # each books its load: 8 Gbit/s to e1 for 500 s, 4 Gbit/s to e2 for 1,000 s
    assert [(t, a, b, round(g, 6), until - at) for t, a, b, g, at, until in s.path_book.entries] == \
        [("g1", "store.west", E1, 8.0, pytest.approx(500.0)), ("g2", "store.west", E2, 4.0, pytest.approx(1000.0))]
    # a third reads both bookings: e1 at 0.4 Gbit/s (10,000 s) against e2 at max(4 - 4, 5 % of 4) = 0.2
    # (20,000 s): e1, where two nodes are still free (what is left of a store's paths is kept per
    # burst while nothing is booked: g2's booking must show)
    s = data_cluster()
    d1, d2, d3 = s.decide_many([loader("g1"), loader("g2"), loader("g3")], NOW)
    assert set(d2.nodes) <= {"n4", "n5", "n6", "n7"} and set(d3.nodes) <= {"n0", "n1", "n2", "n3"}
    # without the booking both count on e1's 8 Gbit/s: g2 goes there too
    monkeypatch.setattr(PathBook, "add", lambda *a, **k: None)
    s = data_cluster()
    d1, d2 = s.decide_many([loader("g1"), loader("g2")], NOW)
    assert set(d1.nodes) | set(d2.nodes) <= {"n0", "n1", "n2", "n3"}


def test_a_booking_counts_until_a_window_of_its_path_ends_after_it():
    s = data_cluster()
    s.decide_many([loader("g1")], NOW)
    assert len(s.path_book.entries) == 1
    # a window of store.west -> e1 that ended before the booking: still unseen, g2 avoids e1
    d = s.decide_many([loader("g2")], NOW + 5)[0]
    assert set(d.nodes) <= {"n4", "n5", "n6", "n7"}
    s.end("g2")
    # the next window (ending after the booking) measures the load itself: the booking is dropped and
    # the path's own throughput is what the next decision reads (here 8 Gbit/s again: g3 goes to e1)
    s.net.put(f"store.west|{E1}".encode(), {"src": "store.west", "dst": E1,
                                            "metrics": {"rtt_ms": win(NOW + 30, 20.0), "bw_gbps": gbps(NOW + 30, 8.0)}})
    d = s.decide_many([loader("g3")], NOW + 31)[0]
    assert set(d.nodes) <= {"n0", "n1", "n2", "n3"}
    assert [(e[0], e[4]) for e in s.path_book.entries] == [("g3", NOW + 31)]  # g2's went when it ended


def test_a_booking_ends_when_its_transfer_is_expected_to_end():
    book = PathBook()
    book.add("t", [("a", "b"), ("b", "a"), ("c", "c")], 4.0, at=100.0, until=160.0)
    assert len(book.entries) == 2  # a path to itself carries nothing
    book.add("u", [("a", "b")], 0.0, at=100.0, until=200.0)  # nothing to send: nothing booked
    book.add("v", [("a", "b")], 1.0, at=100.0, until=200.0)
    assert book.unseen(None, 150.0) == {("a", "b"): 5.0, ("b", "a"): 4.0}
    assert book.others("v", book.unseen(None, 150.0)) == {("a", "b"): 4.0, ("b", "a"): 4.0}
    assert book.others("w", book.unseen(None, 150.0)) is book.unseen(None, 150.0)  # nothing of its own
    book.release("v")
    assert book.unseen(None, 150.0) == {("a", "b"): 4.0, ("b", "a"): 4.0}
    assert book.unseen(None, 160.0) == {} and book.entries == []


def test_a_gang_across_racks_books_its_all_reduce_rate_between_them():
    # one node per rack, 400 Gbit/s NICs, 0.2 ms apart (one 64 MiB window per round trip: 2,684 Gbit/s):
    # the pair books 0.43 x 400 = 172 Gbit/s each way for its run. The 20 Gbit/s the path measures does
    # not bound a gang's member pairs (seconds.Costing._paths: a running gang's own traffic is in it)
    nodes = [gpu_node("a0", NOW, rack="a", region="east"), gpu_node("b0", NOW, rack="b", region="east")]
    ra, rb = "rack:east/a", "rack:east/b"
    paths = {(x, y): {"rtt_ms": win(NOW, 0.05 if x == y else 0.2), **({} if x == y else {"bw_gbps": gbps(NOW, 20.0)})}
             for x in (ra, rb) for y in (ra, rb)}
    s = make_scheduler(nodes, paths)
    s.node_timeout_s, s.freshness = math.inf, None
    d = s.decide(Task(id="g", type="training-data-parallel", peers=2, resources={"cards": 8}, submitted_at=NOW,
                      expected_duration_s=3600.0), NOW)
    assert sorted(d.nodes) == ["a0", "b0"]
    got = sorted((e[1], e[2], round(e[3], 6)) for e in s.path_book.entries)
    rate = round(TRAINING_COMM_SHARE * 400.0, 6)
    assert got == [(ra, rb, rate), (rb, ra, rate)]
    # for its run: 3,600 x (0.57 + 0.43 x (2 x 0.0002 + 8 / 400) / (2 x 0.00005 + 8 / 100)) = 2,446 s
    run = float(run_seconds(3600.0, 1.0, TRAINING_COMM_SHARE, 2, 0.2, 400.0))
    assert run == pytest.approx(2446.4, abs=0.5)
    assert [e[5] for e in s.path_book.entries] == [pytest.approx(NOW + run)] * 2


def test_what_is_left_of_a_store_s_paths_is_kept_without_keeping_the_inputs_alive():
    """The kept rate left from a store (read again by each loader of a burst) holds the network
    inputs it was computed on by weak reference, as the path book its table: once the scheduler's own
    cache lets go of them they are freed, and a later burst on new inputs computes it again."""
    import gc
    import weakref

    s = data_cluster()
    s.decide_many([loader("g1"), loader("g2")], NOW)  # g1's booking: g2 reads the store's rate left
    kept = {k: v for k, v in s._cache.items() if isinstance(k, tuple) and k[0] == "left from"}
    assert kept
    (_, (net_ref, *_rest)), = kept.items()
    net = net_ref()
    assert net is not None
    gone = weakref.ref(net)
    del net
    for k in [k for k in s._cache if not (isinstance(k, tuple) and k[0] == "left from")]:
        del s._cache[k]  # the scheduler's caches move on (a new view, new inputs)
    gc.collect()
    assert gone() is None
    d3, = s.decide_many([loader("g3")], NOW)  # computed again on the new inputs: g2's booking shows
    assert set(d3.nodes) <= {"n0", "n1", "n2", "n3"}


def test_left_from_is_left_of_booked_from():
    """The compiled pass against the two array steps it fuses, bit for bit: bookings to some racks
    from this store and from others, nodes without a rack, no path (0), unknown (NaN), float32 rows."""
    from types import SimpleNamespace

    from streams.worker.scheduling.bandwidth import left_from, rack_codes

    rng = np.random.default_rng(3)
    for trial in range(100):
        racks = [f"rack:r{i}" for i in range(int(rng.integers(1, 6)))]
        n = int(rng.integers(0, 40))
        table = SimpleNamespace(node_rack=rng.integers(-1, len(racks), n), _rack_rows={})
        table._rack_rows["rack codes"] = {r: i for i, r in enumerate(racks)}
        book = {(src, r): float(rng.choice([0.5, 3.0, 20.0])) for src in ("store.a", "store.b") for r in racks
                if rng.random() < 0.5}
        bw = rng.choice([0.0, 1.0, 8.0, 100.0, np.nan], n).astype(rng.choice([np.float32, np.float64]))
        want = left(bw.astype(np.float64), booked_from(book, "store.a", rack_codes(table), table.node_rack))
        got = left_from(bw, book, "store.a", table)
        assert got.dtype == np.float64 and got.tobytes() == want.tobytes(), trial
    # worked: 10 Gbit/s with 4 booked on its rack's path -> 6; with 12 -> 0.5; no rack -> 10
    table = SimpleNamespace(node_rack=np.array([0, 1, -1]), _rack_rows={"rack codes": {"rack:x": 0, "rack:y": 1}})
    got = left_from(np.full(3, 10.0), {("s", "rack:x"): 4.0, ("s", "rack:y"): 12.0, ("t", "rack:x"): 9.0}, "s", table)
    assert got.tolist() == [6.0, 0.5, 10.0]


def test_the_books_rates_by_source_are_its_rates():
    """PathBook.unseen's result keeps its rates by source in step (built, then added to): what is
    booked from a store reads the same from it as from a plain copy of the pairs, bit for bit."""
    from streams.worker.scheduling.bandwidth import Booked, booked_per_rack

    book = PathBook()
    book.add("g1", [("rack:x", "rack:y"), ("rack:y", "rack:x")], 2.5, 0.0, 100.0)
    book.add("l1", [("store.a", "rack:x"), ("store.a", "rack:z")], 0.1, 0.0, 100.0)
    got = book.unseen(None, 1.0)
    assert isinstance(got, Booked) and got.by_source == {"rack:x": {"rack:y": 2.5}, "rack:y": {"rack:x": 2.5},
                                                         "store.a": {"rack:x": 0.1, "rack:z": 0.1}}
    book.add("l2", [("store.a", "rack:x")], 0.2, 0.0, 100.0)  # added to the kept sum, not rebuilt
    assert book.unseen(None, 2.0) is got and got.by_source["store.a"]["rack:x"] == got[("store.a", "rack:x")]
    code = {"rack:x": 0, "rack:y": 1, "rack:z": 2}
    for src in ("store.a", "rack:x", "store.b"):
        assert booked_per_rack(got, src, code).tobytes() == booked_per_rack(dict(got), src, code).tobytes()
    assert booked_per_rack(got, "store.a", code).tolist() == [0.1 + 0.2, 0.0, 0.1, 0.0]
    # between racks: the sorted pairs kept until the next booking, the same as from a plain copy
    ra, rb = np.array([0, 1, 0, -1, 2]), np.array([1, 0, 2, 0, 0])
    assert booked_between(got, code, ra, rb).tolist() == booked_between(dict(got), code, ra, rb).tolist() == \
        [2.5, 2.5, 0.0, 0.0, 0.0]
    assert got.pairs is not None
    book.add("g2", [("rack:z", "rack:x")], 1.0, 0.0, 100.0)
    assert got.pairs is None and booked_between(got, code, ra, rb).tolist() == [2.5, 2.5, 0.0, 0.0, 1.0]


def test_what_is_left_of_a_stores_paths_is_read_again_only_after_a_booking_from_it():
    """A gang's booking between racks, or another store's, leaves what is left of store.west's paths as
    it was read (the same array); a booking from store.west itself makes it read again, and it shows."""
    from streams.adapters.tasks import endpoints
    from streams.worker.scheduling.seconds import Costing

    s = data_cluster()
    s.decide_many([loader("g1")], NOW)  # books store.west -> e1

    def left_at_store():
        nodes = s.nodes(NOW)
        task = loader("probe")
        net = s.network(endpoints([task]), nodes, "bandwidth")
        return Costing(s, task, net, nodes, NOW)._left_from("store.west")

    first = left_at_store()
    s.path_book.add("g9", [(E1, E2), (E2, E1)], 50.0, NOW, NOW + 100)  # a gang across the two racks
    s.path_book.add("l9", [("store.east", E2)], 3.0, NOW, NOW + 100)  # another store's load
    assert left_at_store() is first
    s.path_book.add("l10", [("store.west", E2)], 3.0, NOW, NOW + 100)  # a load from this store, to e2
    again = left_at_store()
    assert again is not first and (again[4:] < first[4:]).all() and (again[:4] == first[:4]).all()
