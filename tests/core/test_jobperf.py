import numpy as np
import pytest

from core.jobperf import PerfModel, allreduce_s, comm_shares, job_time, job_time_reference

M = PerfModel()  # 1 GB gradient, ideal: 0.05 ms RTT, 100 Gbit/s


def test_worked_example():
    # a 4-node data-parallel job, 1000 s on one rack, communicating 30 % of that time there.
    # ideal all-reduce: 2*3*0.05 ms = 0.0003 s + 2*3/4 * 8 Gbit / 100 Gbit/s = 0.12 s -> 0.1203 s
    # placed across sites: worst pair 5 ms, narrowest 10 Gbit/s:
    #   2*3*0.005 = 0.03 s + 1.5 * 8 / 10 = 1.2 s -> 1.23 s; ratio 1.23 / 0.1203 = 10.22444
    # time: 1000 * (0.7 + 0.3 * 10.22444) = 3767.33 s
    # and 100 GB of data loaded over 10 Gbit/s instead of 100: 800/10 - 800/100 = 72 s more -> 3839.33 s
    assert allreduce_s([4], [0.05], [100.0], 1.0)[0] == pytest.approx(0.1203)
    assert allreduce_s([4], [5.0], [10.0], 1.0)[0] == pytest.approx(1.23)
    t = job_time([1000.0], [0.3], [4], [5.0], [10.0], [100.0], [10.0], M)
    assert t[0] == pytest.approx(1000 * (0.7 + 0.3 * 1.23 / 0.1203) + 72, rel=1e-12)
    assert t[0] == pytest.approx(3839.33, abs=0.01)


def test_ideal_placement_and_single_node_keep_the_trace_duration():
    t = job_time([500.0, 500.0], [0.4, 0.4], [8, 1], [0.05, 99.0], [100.0, 1.0], [0.0, 0.0], [1.0, 1.0], M)
    assert t.tolist() == [500.0, 500.0]
    # data already at hand (a faster path than the ideal) costs nothing extra, never less
    assert job_time([500.0], [0.0], [1], [1.0], [1.0], [10.0], [400.0], M)[0] == 500.0


def test_kernel_matches_reference_on_random_jobs():
    rng = np.random.default_rng(7)
    J = 500
    args = (rng.uniform(10, 1e5, J), comm_shares(J, M, seed=3), rng.integers(1, 65, J), rng.uniform(0.05, 300, J),
            rng.uniform(0.5, 400, J), np.where(rng.random(J) < 0.5, rng.uniform(0, 500, J), 0.0),
            rng.uniform(0.5, 400, J))
    np.testing.assert_allclose(job_time(*args, M), job_time_reference(*args, M), rtol=1e-12)
    assert job_time(*(np.zeros(0),) * 7, M).shape == (0,)


def test_shares_are_seeded_and_in_range():
    a, b = comm_shares(1000, M, seed=1), comm_shares(1000, M, seed=1)
    assert np.array_equal(a, b) and a.min() >= 0.1 and a.max() <= 0.5
    with pytest.raises(ValueError):
        PerfModel(comm_share_low=0.6, comm_share_high=0.5)


def test_faster_cards_shorten_only_the_computing_share():
    # the worked example's job on cards 1.5x the reference: 1000 * (0.7 / 1.5 + 0.3 * 10.22444) + 72
    t = job_time([1000.0], [0.3], [4], [5.0], [10.0], [100.0], [10.0], M, speed=[1.5])
    assert t[0] == pytest.approx(1000 * (0.7 / 1.5 + 0.3 * 1.23 / 0.1203) + 72, rel=1e-12)
    rng = np.random.default_rng(2)
    args = (rng.uniform(10, 1e4, 50), comm_shares(50, M, seed=1), rng.integers(1, 9, 50), rng.uniform(0.05, 50, 50),
            rng.uniform(1, 100, 50), np.zeros(50), np.ones(50))
    speed = rng.uniform(0.5, 2.0, 50)
    np.testing.assert_allclose(job_time(*args, M, speed=speed), job_time_reference(*args, M, speed=speed), rtol=1e-12)
