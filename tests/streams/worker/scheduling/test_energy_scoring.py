"""Energy-aware scoring in the scheduler: cheaper, greener nodes win for tasks that ask, and tasks that
don't get exactly the scores they had before."""

import time

import pytest

from schemas.sched import Task
from tests.helpers.scheduling import gpu_node, make_scheduler, win


def scheduler(now, energy: bool):
    # n0 computes 5 % faster; n1 is cheap and green; n2 reports nothing about energy
    figures = {"n0": (120.0, 450.0), "n1": (40.0, 50.0), "n2": (None, None)}
    reports = [gpu_node(node, now, 1000 if i == 0 else 950,
                        **({"power_kw": 10.0, "energy_price_per_mwh": price, "carbon_g_per_kwh": carbon}
                           if energy else {}))
               for i, (node, (price, carbon)) in enumerate(figures.items())]
    return make_scheduler(reports, {(n, "store"): {"rtt_ms": win(now, 0.6)} for n in figures})


def task(**kw):
    return Task(id="t", type="batch-analytics", resources={"cards": 1},
                data_source={"node": "store", "size_gb": 1}, **kw)


def test_tasks_that_do_not_ask_score_exactly_as_without_energy_figures():
    now = time.time()
    plain = scheduler(now, energy=False).decide(task(), now)
    with_energy = scheduler(now, energy=True).decide(task(), now)
    assert plain.nodes == with_energy.nodes == ["n0"]
    assert [c.model_dump() for c in plain.candidates] == [c.model_dump() for c in with_energy.candidates]
    assert all(c.energy_score is None for c in with_energy.candidates)


def test_cost_sensitive_task_prefers_the_cheap_green_node():
    now = time.time()
    d = scheduler(now, energy=True).decide(task(cost_sensitivity=0.4), now)
    assert d.nodes == ["n1"] and d.cost_sensitivity == 0.4
    by = {c.node: c for c in d.candidates}
    # hourly cost 1.2, 0.4 $/h -> scores 0, 100; carbon 4500, 500 g/h -> 0, 100; n2 unknown -> 50
    assert (by["n0"].energy_score, by["n1"].energy_score, by["n2"].energy_score) == (0.0, 100.0, 50.0)
    for c in d.candidates:  # composite = 0.6 x (0.7 (alpha c + (1 - alpha) n) + 0.3 load) + 0.4 x energy
        raw = 0.7 * (c.alpha * c.compute_score + (1 - c.alpha) * c.network_score) + 0.3 * c.load_score
        assert c.composite == pytest.approx(0.6 * raw + 0.4 * c.energy_score, abs=1e-3)
        assert c.load_score == 100.0  # 1 GB loads in seconds anywhere
