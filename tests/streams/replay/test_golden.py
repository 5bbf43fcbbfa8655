"""The replay's speed work changes nothing (issue 30): a small seeded replay of real Philly jobs over
Skyplane with real RTT dynamics and node failures, every policy, gives per-job results identical bit
for bit to the ones pinned from the engine before it was made faster (golden/replay.json)."""

import json

import numpy as np

from tests.helpers.data import needs_data
from tests.streams.replay.golden.case import PINNED, differences, run_case


@needs_data
def test_the_faster_engine_gives_the_pinned_results_bit_for_bit():
    pinned = json.loads(PINNED.read_text())
    now = run_case()
    # the case exercises what the speed work touches: a queue, migrations, restarts after failures
    assert sum(pinned["ours/0"]["migrations"]) > 0 and sum(pinned["topology/0"]["restarts"]) > 0
    assert differences(pinned, now) == []


def test_the_comparison_sees_a_single_bit():
    pinned = json.loads(PINNED.read_text())
    moved = json.loads(PINNED.read_text())
    end = moved["topology/0"]["end"]
    end[7] = float(np.nextafter(end[7], np.inf))  # one unit in the last place
    assert differences(pinned, moved) == [f"topology/0 end: 1 differ (first job 7: {pinned['topology/0']['end'][7]!r}"
                                          f" -> {end[7]!r})"]
