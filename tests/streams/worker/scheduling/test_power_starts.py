"""Power-aware starts in the scheduler: with a site's ramp limit, placed tasks carry ``start_at`` so
the power started within any minute stays under it; the start timeout counts from then."""

import time

import pytest

from schemas.sched import Task
from streams.worker.scheduling.ramp import RampBook
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def world(now, limits, zones=("dc1", "dc1")):
    # 8-card nodes drawing 800 kW at full load: 100 kW a card
    reports = [gpu_node(f"n{i}", now, zone=z, power_kw=800.0) for i, z in enumerate(zones)]
    s = make_scheduler(reports, {(f"n{i}", "hub"): {"rtt_ms": win(now, 1.0)} for i in range(len(zones))})
    s.ramps = RampBook(limits)
    return s


def job(tid, cards):
    return Task(id=tid, type="fine-tune", resources={"cards": cards})


def test_starts_are_spaced_to_keep_the_sites_ramp():
    now = 1_000_000.0
    s = world(now, {"dc1": 1.0})  # 1 MW a minute at dc1
    assert s.decide(job("t1", 8), now).start_at is None  # 0.8 MW now
    # 0.4 MW more within the minute would be 1.2 MW: a minute later
    assert s.decide(job("t2", 4), now).start_at == now + 60.0
    # 0.2 MW fits beside t1 now (1.0), and beside t2 in its own minute (0.6)
    assert s.decide(job("t3", 2), now).start_at is None
    # the start timeout counts from start_at: at +100 with 50 s, t1 and t3 are late, t2 (due at +60) not
    late = {getattr(x, "task_id", None) for x in s.expire_starts(now + 100.0, 50.0, max_fallbacks=3)}
    assert late == {"t1", "t3"}


def test_the_default_limit_and_sites_without_one():
    now = 1_000_000.0
    s = world(now, {"*": 0.5}, zones=("dc1", "dc2"))
    first = s.decide(job("t1", 8), now)  # 0.8 MW alone: over the limit, so it goes by itself, now
    assert first.start_at is None
    second = s.decide(job("t2", 8), now)  # the other node, another site: its own ramp
    assert second.start_at is None and second.nodes != first.nodes
    third = s.decide(job("t3", 0), now)  # no cards: draws nothing here
    assert third.start_at is None
    free = world(now, {})
    assert free.decide(job("a", 8), now).start_at is None and free.decide(job("b", 8), now).start_at is None


def test_no_reported_power_no_delay():
    now = time.time()
    reports = [gpu_node("n0", now, zone="dc1")]
    s = make_scheduler(reports, {("n0", "hub"): {"rtt_ms": win(now, 1.0)}})
    s.ramps = RampBook({"dc1": 0.001})
    assert s.decide(job("a", 4), now).start_at is None and s.decide(job("b", 4), now).start_at is None


def test_a_move_books_what_it_adds_at_the_target_site():
    now = 1_000_000.0
    s = world(now, {"dc2": 1.0}, zones=("dc1", "dc2", "dc2"))
    s.inv.put(b"n0", gpu_node("n0", now, zone="dc1", power_kw=800.0, peak_tflops={"fp16": 4000, "fp32": 100}))
    assert s.decide(job("t0", 8), now).nodes == ["n0"]  # the strongest node, dc1 (no limit there)
    filler = s.decide(job("f1", 4), now)  # 0.4 MW at dc2 now
    assert filler.nodes[0] in ("n1", "n2") and filler.start_at is None
    s.start("t0", ["n0"])
    s.inv.put(b"n0", gpu_node("n0", now + 1, zone="dc1", power_kw=800.0, status="down"))
    ev = next(e for e in s.reschedule(now + 1) if e.task_id == "t0")
    # 0.8 MW more at dc2 beside the filler's 0.4 within the minute: after the filler's minute, at +60
    assert ev.trigger == "node_failed" and ev.to_nodes[0] in ("n1", "n2") and ev.start_at == now + 60.0


def test_checkpoints_are_spread_over_the_interval():
    now = 1_000_000.0
    s = world(now, {"dc1": 10.0})  # a limit that never delays a start here
    # 12 slots of 1800 / 12 = 150 s: each task takes the slot with the least MW checkpointing
    phases = [s.decide(job(f"t{k}", c), now).checkpoint_phase_s for k, c in enumerate((8, 4, 2))]
    assert phases == [0.0, 150.0, 300.0]
    s.end("t0")  # its 0.8 MW leave slot 0
    assert s.decide(job("t3", 2), now).checkpoint_phase_s == 0.0
    assert s.ramps.slots["dc1"][:4].tolist() == pytest.approx([0.2, 0.4, 0.2, 0.0])
    assert world(now, {}).decide(job("free", 8), now).checkpoint_phase_s is None  # no limits: no phase
