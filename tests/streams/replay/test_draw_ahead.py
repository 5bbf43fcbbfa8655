"""The replay draws the next epoch's probe windows ahead on another core (world.DrawAhead): what the
Scheduler reads must be what drawing at the time gives (core.observe.observe_medians), bit for bit,
however the truth moved in between, and only the paths whose truth moved are drawn again."""

import sys

import numpy as np

from core.observe import ProbeModel, observe_medians
from streams.replay.world import DrawAhead


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def test_windows_drawn_ahead_are_the_windows_drawn_at_the_time():
    rng = np.random.default_rng(4)
    model = ProbeModel()
    paths = 60
    rtt = rng.uniform(0.05, 200.0, paths)
    loss = np.where(rng.random(paths) < 0.3, rng.uniform(0, 0.2, paths), 0.0)
    jitter = rng.uniform(0.01, 0.3, paths)
    before = sys.getswitchinterval()
    with DrawAhead(model) as ahead:
        seeds = [10, 11, 12, 13, 20, 21, 22]  # 13 -> 20: an epoch was skipped (nothing drawn ahead for 20)
        expected_redrawn = 0
        for k, seed in enumerate(seeds):
            if k in (2, 5):  # the truth moves between epochs: a few paths' RTT, another's loss only
                moved = rng.choice(paths, 8, replace=False)
                rtt = rtt.copy()
                rtt[moved[:7]] *= 1.7
                loss = loss.copy()
                loss[moved[7]] = 0.5 + 0.1 * k
                expected_redrawn += moved.size
            got = ahead.windows(rtt, loss, jitter, seed, seed + 1)  # the replay's next epoch's seed
            assert _same(got, observe_medians(rtt, loss, model, seed, jitter)), f"epoch seeded {seed}"
        assert ahead.redrawn == expected_redrawn  # only the moved paths, and only when drawn ahead
        assert abs(sys.getswitchinterval() - DrawAhead.SWITCH_S) < 1e-9  # held in whole microseconds
    assert sys.getswitchinterval() == before  # restored on leaving


def test_without_measured_spreads_and_when_nothing_moves():
    model = ProbeModel(probes=30)
    rtt, loss = np.array([1.0, 50.0, 120.0]), np.array([0.0, 0.1, 1.0])
    with DrawAhead(model) as ahead:
        for seed in range(5):
            assert _same(ahead.windows(rtt, loss, None, seed, seed + 1), observe_medians(rtt, loss, model, seed))
        assert ahead.redrawn == 0
