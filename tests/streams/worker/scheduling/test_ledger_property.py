"""Random runs of the scheduler (hypothesis): submissions, task ends, window changes, node failures and
recoveries, rescorings. After every step the ledger holds no more than any node's capacity, the
running tasks hold exactly their nodes, and every task is placed, queued (with the reasons) or ended."""

import time

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NODES = ("n0", "n1", "n2")
NOW = time.time()

submit = st.tuples(st.just("submit"), st.integers(1, 8), st.integers(1, 2),
                   st.sampled_from(["training-data-parallel", "inference", "fine-tune", "batch-analytics"]))
rescore = st.tuples(st.just("rescore"),)
# weighted by repetition: submissions and rescorings are the common steps
step = st.one_of(
    submit, submit, submit, rescore, rescore,
    st.tuples(st.just("storm"), st.sampled_from(NODES)),  # every path degrades but one node's
    st.tuples(st.just("end"), st.integers(0, 20)),
    st.tuples(st.just("start"), st.integers(0, 20)),  # the runner confirms where a task runs
    st.tuples(st.just("refuse"), st.integers(0, 20)),
    st.tuples(st.just("expire"),),  # start timeouts: fallbacks, rollbacks of moves
    st.tuples(st.just("window"), st.sampled_from(NODES), st.sampled_from([0.3, 5.0, 300.0]), st.integers(0, 30)),
    st.tuples(st.just("down"), st.sampled_from(NODES)),
    st.tuples(st.just("up"), st.sampled_from(NODES)),
)


def check(s, submitted: set, ended: set, t: float) -> None:
    index = {n: i for i, n in enumerate(NODES)}
    capacity = np.array([[8, 8 * 80, 1024]] * len(NODES), float)
    assert s.ledger.overbooked(index, capacity) == []
    for tid, run in s.running.items():  # its nodes, and during a move the ones it is leaving
        leaving = set(run.rollback[4]) if run.rollback else set()
        assert set(s.ledger.nodes_of(tid)) == set(run.nodes) | leaving, tid
    assert set(s.ledger.tasks()) == set(s.running)
    running, queued = set(s.running), set(s.pending)
    assert not running & queued and not (running | queued) & ended
    assert running | queued | ended == submitted


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=10))
# known hard cases, always run: two moves into one node in one pass; a failed node with a gang on it
@example([("submit", 5, 1, "training-data-parallel"), ("submit", 5, 1, "training-data-parallel"), ("storm", "n2"),
          ("rescore",)])
# a started task moves (both ends held), starts at the target (the source freed), then a move rolls back
@example([("submit", 2, 1, "training-data-parallel"), ("start", 0), ("storm", "n1"), ("rescore",), ("start", 0),
          ("storm", "n2"), ("rescore",), ("expire",), ("expire",)])
# moves of different network profiles into one node (found by this test)
@example([("submit", 1, 1, "training-data-parallel"), ("submit", 4, 1, "inference"),
          ("submit", 4, 1, "training-data-parallel"), ("down", "n0"), ("rescore",)])
@example([("submit", 4, 2, "training-data-parallel"), ("down", "n0"), ("rescore",), ("up", "n0"), ("rescore",),
          ("end", 0), ("rescore",)])
def test_random_runs_keep_the_books(steps):
    paths = {(n, "store"): {"rtt_ms": win(NOW, 0.5)} for n in NODES}
    s = make_scheduler([gpu_node(n, NOW) for n in NODES], paths)
    submitted, ended, t, k = set(), set(), NOW, 0
    for st_ in steps:
        t += 11.0
        for n in NODES:  # every node reports (its current status) like a heartbeat
            rec = s.inv.get_key(n.encode())
            s.inv.put(n.encode(), {**rec, "received_at": t, "ts": t})
        if st_[0] == "submit":
            _, cards, peers, type_ = st_
            tid = f"t{k}"
            k += 1
            d = s.decide(Task(id=tid, type=type_, resources={"cards": cards}, peers=peers, checkpoint_gb=1,
                              data_source={"node": "store", "size_gb": 1}), t)
            submitted.add(tid)
            assert d.status == "placed" or d.rejected or d.fallbacks or not d.candidates or peers > 1
        elif st_[0] == "end":
            live = sorted(s.running) + sorted(s.pending)
            if live:
                tid = live[st_[1] % len(live)]
                s.end(tid)
                ended.add(tid)
        elif st_[0] in ("start", "refuse"):
            live = sorted(s.running)
            if live:
                tid = live[st_[1] % len(live)]
                if st_[0] == "start":
                    s.start(tid, s.running[tid].nodes)
                elif s.roll_back(tid, t) is None:
                    s.refuse(tid, "refused", t, 2)
        elif st_[0] == "expire":
            s.expire_starts(t, 20.0, 2)
        elif st_[0] == "window":
            _, n, p95, lost = st_
            s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(t, p95, lost)}})
            s.touch()
        elif st_[0] == "storm":
            for n in NODES:
                p95, lost = (0.3, 0) if n == st_[1] else (300.0, 30)
                s.net.put(f"{n}|store".encode(), {"src": n, "dst": "store", "metrics": {"rtt_ms": win(t, p95, lost)}})
            s.touch()
        elif st_[0] in ("down", "up"):
            rec = s.inv.get_key(st_[1].encode())
            s.inv.put(st_[1].encode(), {**rec, "status": "down" if st_[0] == "down" else "up"})
        else:
            s.retry_pending(t)
            s.reschedule(t)
        check(s, submitted, ended, t)
