"""core.pairs: a gang's candidate sets' worst pair RTT, narrowest pair bandwidth and whether every pair
is measured, compiled, against the array form it replaces (bit for bit) and a worked example."""

import numpy as np
import pytest

from core.pairs import sets_worst_narrow, sets_worst_narrow_reference


@pytest.mark.parametrize("seed", range(10))
def test_the_compiled_pass_is_the_array_form(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        k, g = int(rng.integers(0, 12)), int(rng.integers(2, 6))
        rtt = rng.choice([0.0, 0.05, 0.2, 12.5, 80.0, np.nan, np.inf], (k, g, g)) * rng.uniform(0.5, 2, (k, g, g))
        if rng.random() < 0.2:
            rtt[:] = np.nan  # nothing measured in the block: one rack's RTT stands in
        gbps = rng.choice([0.0, 5.0, 100.0, 400.0, np.nan, np.inf], (k, g, g))
        got = sets_worst_narrow(rtt, gbps, 0.05)
        want = sets_worst_narrow_reference(rtt, gbps, 0.05)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_worked_example():
    # one set of two: 50 ms one way, unmeasured back (taken at the block's worst measured, 50 ms);
    # 100 Gbit/s links, but one 64 MiB window per 50 ms carries 64 x 2^20 x 8 / 0.05 / 1e9 = 10.74 Gbit/s
    rtt = np.array([[[0.05, 50.0], [np.nan, 0.05]]])
    worst, narrow, measured = sets_worst_narrow(rtt, np.full((1, 2, 2), 100.0), 0.05)
    assert worst.tolist() == [50.0] and narrow[0] == pytest.approx(10.737, abs=1e-3) and measured.tolist() == [False]
    # a dark pair (0 Gbit/s) is the narrowest; a NaN bandwidth spreads as numpy's minimum does
    assert sets_worst_narrow(rtt, np.array([[[1.0, 0.0], [5.0, 1.0]]]), 0.05)[1].tolist() == [0.0]
    assert np.isnan(sets_worst_narrow(rtt, np.array([[[1.0, np.nan], [5.0, 1.0]]]), 0.05)[1][0])
