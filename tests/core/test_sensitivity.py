"""A one-node training task's alpha: the network weighs the share of its time its loads take
(core.sensitivity.one_node_alphas), the load over its best path (core.scoring.best_load_s)."""

import numpy as np
import pytest

from core.scoring import best_load_s
from core.sensitivity import one_node_alphas
from streams.dev.synthetic import synthetic_inputs


def one_node_reference(alpha, one, load, dur):
    out = []
    for a, o, lo, d in zip(alpha, one, load, dur, strict=True):
        if not o or np.isnan(lo) or np.isinf(lo):
            out.append(a)
        elif lo == 0:
            out.append(1.0)
        elif not (d > 0):  # NaN or <= 0: run time unknown
            out.append(a)
        else:
            out.append(max(a, 1 - lo / (lo + d)))
    return np.array(out, np.float64)


def test_worked_examples():
    # alpha 0.2; 500 GB at 10 Gbit/s = 400 s before a 3,600 s run: 1 - 400 / 4,000 = 0.9
    # before a 100 s run: 1 - 400 / 500 = 0.2, no lower than the type's 0.2
    # before a 50 s run: 1 - 400 / 450 = 0.11 < 0.2, the type's alpha stays
    got = one_node_alphas(np.array([0.2, 0.2, 0.2]), np.array([True] * 3), np.array([400.0] * 3),
                          np.array([3600.0, 100.0, 50.0]))
    assert got.tolist() == pytest.approx([0.9, 0.2, 0.2])


def test_edges_nothing_loaded_unknown_run_unreachable_load_and_gangs():
    alpha = np.array([0.2, 0.3, 0.5, 0.2, 0.2, 0.2])
    one = np.array([True, True, True, True, False, True])
    load = np.array([0.0, 0.0, 400.0, np.inf, 400.0, np.nan])
    dur = np.array([3600.0, np.nan, np.nan, 3600.0, 3600.0, 3600.0])
    got = one_node_alphas(alpha, one, load, dur)
    # no load: 1 whatever the run; a load but no run known: its alpha; unreachable or unknown load:
    # its alpha; not one node (a gang): its alpha
    assert got.tolist() == [1.0, 1.0, 0.5, 0.2, 0.2, 0.2]
    assert one_node_alphas(np.zeros(0), np.zeros(0, bool), np.zeros(0), np.zeros(0)).shape == (0,)


def test_matches_the_plain_reference_on_random_inputs():
    rng = np.random.default_rng(3)
    n = 500
    alpha = rng.uniform(0, 1, n)
    one = rng.random(n) < 0.7
    load = np.where(rng.random(n) < 0.2, 0.0, rng.lognormal(5, 2, n))
    load[rng.random(n) < 0.05] = np.inf
    load[rng.random(n) < 0.05] = np.nan
    dur = np.where(rng.random(n) < 0.1, np.nan, rng.lognormal(8, 2, n))
    dur[rng.random(n) < 0.05] = 0.0
    np.testing.assert_allclose(one_node_alphas(alpha, one, load, dur), one_node_reference(alpha, one, load, dur))


def test_best_load_is_over_the_widest_path_to_an_available_node():
    x = synthetic_inputs(40, 25, 6, seed=11)
    x.bandwidth_gbps[:, :3] = np.nan
    x.bandwidth_gbps[2, :] = 0.0  # endpoint 2: no bandwidth anywhere
    x.available[5:9] = False
    got = best_load_s(x)
    for j in range(x.n_jobs):
        if x.data_ep[j] < 0 or x.data_gb[j] <= 0:
            assert got[j] == 0.0
            continue
        bws = [float(b) for b, ok in zip(x.bandwidth_gbps[x.data_ep[j]], x.available, strict=True)
               if ok and np.isfinite(b) and b > 0]
        want = x.data_gb[j] * 8.0 / max(bws) if bws else np.inf
        assert got[j] == pytest.approx(want, rel=1e-6), j
    assert np.isinf(got[(x.data_ep == 2) & (x.data_gb > 0)]).all()
