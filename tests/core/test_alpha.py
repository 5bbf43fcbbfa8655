import numpy as np
import pytest

from core.alpha import learn_alpha, spearman


def test_spearman_worked_examples():
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0]))[0] == pytest.approx(1.0)
    assert spearman(np.array([3.0, 2.0, 1.0]), np.array([10.0, 20.0, 30.0]))[0] == pytest.approx(-1.0)
    # ties share ranks: [1, 1, 2] vs [1, 2, 3] -> ranks [0.5, 0.5, 2] -> rho = 0.866
    assert spearman(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]))[0] == pytest.approx(0.8660254)
    assert np.isnan(spearman(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0]))[0])


@pytest.mark.parametrize("planted", [0.15, 0.5, 0.85])
def test_recovers_a_planted_alpha_from_synthetic_outcomes(planted):
    rng = np.random.default_rng(int(planted * 100))
    c = rng.uniform(0, 100, 400)
    n = rng.uniform(0, 100, 400)
    # achieved throughput grows with the true composite, through a non-linear curve, with noise
    truth = planted * c + (1 - planted) * n
    achieved = np.exp(truth / 25.0) * rng.lognormal(0, 0.05, 400)
    alpha, rho = learn_alpha(c, n, achieved)
    assert alpha == pytest.approx(planted, abs=0.05)
    assert rho > 0.95


def test_too_little_history_keeps_the_default():
    assert learn_alpha(np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([1.0, 2.0]), default=0.3)[0] == 0.3
    nan = float("nan")
    alpha, rho = learn_alpha(np.array([1.0, nan, 3.0, 4.0]), np.array([4.0, 3.0, nan, 1.0]), np.array([1.0, 2.0, 3.0, nan]), default=0.7)
    assert alpha == 0.7 and np.isnan(rho)  # two usable tasks only
