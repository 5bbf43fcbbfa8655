"""Random runs on inputs shaped as real machines send them (issue 27): reports with `free` and
varying ages, nodes that fail with no room elsewhere, windows that expire, racks named alike in two
sites. After every step: no node over capacity; a task fits a node exactly when the node's free whole
cards (books and a fresh report agreeing) cover it; every task placed, queued or ended; no incident
open once its tasks are elsewhere or queued."""

import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.feasibility import fitting
from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win

NODES = {"eu-a": ("eu", "r1"), "eu-b": ("eu", "r2"), "us-a": ("us", "r1"), "us-b": ("us", "r1")}
NOW = time.time()

step = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from([1, 2, 4, 8]), st.integers(1, 2), st.booleans()),
    st.tuples(st.just("submit"), st.sampled_from([4, 8]), st.integers(1, 2), st.booleans()),
    st.tuples(st.just("end"), st.integers(0, 30)),
    st.tuples(st.just("fail"), st.sampled_from(sorted(NODES))),
    st.tuples(st.just("back"), st.sampled_from(sorted(NODES))),
    st.tuples(st.just("quiet"), st.integers(1, 400)),  # time passes, windows age (some expire)
    st.tuples(st.just("rescore"),),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=12), st.integers(0, 30))
def test_random_runs_on_real_shaped_inputs(steps, age):
    paths = {(n, "store"): {"rtt_ms": win(NOW, 0.5)} for n in NODES}
    paths[("rack:eu/r1", "rack:us/r1")] = {"rtt_ms": win(NOW, 90.0)}
    s = make_scheduler([], paths)
    dead: set[str] = set()
    submitted, t, k = set(), NOW, 0

    def report(at):
        for n, (region, rack) in NODES.items():
            if n in dead:
                continue
            # what the node knows at its report's time: the holds booked before it
            held = s.ledger.allocated({n: 0}, 1)[0] - s.ledger.allocated({n: 0}, 1, since=np.array([at - age]))[0]
            free = {"cards": int(8 - held[0]), "mem_gb": 640 - float(held[1]), "host_mem_gb": 1024 - float(held[2])}
            s.inv.put(n.encode(), gpu_node(n, at - age, region=region, rack=rack, free=free))

    report(t)
    for st_ in steps:
        t += 5.0
        if st_[0] == "quiet":
            t += st_[1]
        report(t)
        if st_[0] == "submit":
            _, cards, peers, same_rack = st_
            tid = f"t{k}"
            k += 1
            s.decide(Task(id=tid, type="training-data-parallel", resources={"cards": cards}, peers=peers,
                          checkpoint_gb=1, data_source={"node": "store", "size_gb": 1},
                          constraints={"same_rack": True} if same_rack and peers > 1 else None), t)
            submitted.add(tid)
        elif st_[0] == "end":
            live = sorted(s.running) + sorted(s.pending)
            if live:
                s.end(live[st_[1] % len(live)])
        elif st_[0] == "fail":
            dead.add(st_[1])
            t += 120.0  # silent past the node timeout
            report(t)
        elif st_[0] == "back":
            dead.discard(st_[1])
            report(t)
        s.watch(t)
        s.reschedule(t)
        s.recover(t)
        s.retry_pending(t)
        s.watch(t)
        t += 1.0
        report(t)  # the nodes report what they hold now (a report ``age`` s old: later bookings unknown to it)
        nodes = s.nodes(t)
        index = {n: i for i, n in enumerate(nodes.ids)}
        cap = np.array([[8, 640, 1024]] * len(nodes.ids), float)
        assert s.ledger.overbooked(index, cap) == []
        # the reports agree with the books: a node offers exactly its free whole cards
        alloc = s.ledger.allocated(index, len(nodes.ids))
        live = nodes.available
        assert (nodes.usable[live, 0] == 8 - alloc[live, 0]).all()
        for c in (1, 2, 4, 8):
            want = live & (8 - alloc[:, 0] >= c)
            assert (fitting(nodes.usable, np.array([c, 0, 0], np.float32), live) == want).all()
        for run in s.running.values():  # nothing placed on a dead node survives a rescoring pass
            assert not set(run.nodes) & dead
            if run.task.constraints and run.task.constraints.same_rack:
                racks = {nodes.racks[index[n]] for n in run.nodes}
                assert len(racks) == 1  # one (site, rack)
        assert not set(s.running) & set(s.pending)
        assert set(s.running) | set(s.pending) <= submitted
        for node, inc in s.incidents.open.items():  # mitigated once its tasks are elsewhere, queued or ended
            if inc.mitigated_at is None:
                assert any(node in r.nodes for r in s.running.values() if r.task.id in inc.tasks) and inc.tasks
        assert set(s.incidents.open) == dead & set(nodes.ids)  # open exactly while its node is down
