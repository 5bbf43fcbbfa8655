"""core.gang (a gang's worth and look-ahead, compiled) against the plain composition it replaces —
core.placement's pair_means, peer_scores, packed and _leads over callbacks — bit for bit, over
random qualities with unknown paths, infeasible nodes, energy preferences, float32 alphas and the
packing band; and a worked example written out."""

import numpy as np
import pytest

from core.feasibility import covers
from core.gang import gang_leads, gang_worth
from core.placement import _leads, packed, pair_means, peer_scores


class Plain:
    """The numpy composition (GangScorer before core.gang): rows summed by prefix, peer scores,
    pair means, packed forms."""

    def __init__(self, scores, quality, compute, alpha, unknown, energy, w, left, band):
        self.scores, self.q, self.compute, self.alpha = scores, quality, compute, alpha
        self.unknown, self.energy, self.w, self.left, self.band = unknown, energy, w, left, band
        self.most = max(float(np.max(left, initial=0.0)), 1.0)

    def _sum(self, chosen):
        s = self.q[chosen[0]]
        for m in chosen[1:]:
            s = s + self.q[m]
        return s

    def peers(self, chosen):
        p = peer_scores(self.alpha, self.compute, self._sum(chosen) / len(chosen), self.unknown, self.energy, self.w)
        if self.band <= 0:
            return p
        p[list(chosen)] = -np.inf
        return packed(p, self.left, self.band)

    def value(self, members):
        q = pair_means(np.stack([self.q[m][members] for m in members]), self.unknown)
        energy = None if self.energy is None else self.energy[members]
        worth = peer_scores(self.alpha, self.compute[members], q, self.unknown, energy, self.w)
        v = float((self.scores[members[0]] + worth[1:].sum()) / len(members))
        if self.band > 0:
            v = v - self.band * float(np.clip(self.left[members], 0, None).mean()) / self.most
        return v

    def args(self):
        """core.gang's arguments as GangScorer passes them."""
        on = self.w > 0 and self.energy is not None
        n = len(self.compute)
        return (np.asarray(self.scores, np.float64), self.q, self.compute, float(self.alpha), float(1 - self.alpha),
                float(self.unknown), np.asarray(self.energy, np.float64) if on else np.zeros(n),
                float(self.w) if on else 0.0, np.asarray(self.left, np.float64), float(self.band), self.most)


def _world(rng, n, band, energy_on, alpha32):
    raw = rng.uniform(0, 100, (n, n)).astype(np.float32).astype(np.float64)
    raw[rng.random((n, n)) < 0.15] = np.nan  # unknown paths
    np.fill_diagonal(raw, 100.0)
    unknown = 50.0
    quality = np.where(np.isnan(raw), unknown, raw)
    scores = rng.uniform(0, 100, n).astype(np.float32)
    scores[rng.random(n) < 0.2] = -np.inf  # filtered out
    alpha = np.float32(rng.uniform(0.05, 0.95)) if alpha32 else float(rng.uniform(0.05, 0.95))
    compute = rng.uniform(0, 100, n)
    energy = rng.uniform(0, 100, n) if energy_on else None
    w = float(rng.uniform(0.1, 0.6)) if energy_on else 0.0
    left = rng.integers(-2, 8, n).astype(np.float64)
    return Plain(scores, quality, compute, alpha, unknown, energy, w, left, band)


CASES = [(band, energy, a32) for band in (0.0, 20.0) for energy in (False, True) for a32 in (False, True)]


@pytest.mark.parametrize(("band", "energy_on", "alpha32"), CASES)
def test_a_gangs_worth_is_the_plain_composition_bit_for_bit(band, energy_on, alpha32):
    rng = np.random.default_rng(int(band) * 7 + energy_on * 3 + alpha32)
    for _ in range(40):
        n = int(rng.integers(2, 40))
        p = _world(rng, n, band, energy_on, alpha32)
        for k in sorted({1, 2, min(3, n), min(8, n), min(17, n), n}):  # pairwise sums below and above 8 terms
            members = [int(x) for x in rng.choice(n, k, replace=False)]
            got = gang_worth(np.array(members, np.int64), *p.args())
            assert got == p.value(members) or (np.isnan(got) and np.isnan(p.value(members)))
    assert gang_worth(np.zeros(0, np.int64), *p.args()) == -np.inf


@pytest.mark.parametrize(("band", "energy_on", "alpha32"), CASES)
def test_the_look_ahead_is_the_plain_one_bit_for_bit(band, energy_on, alpha32):
    rng = np.random.default_rng(100 + int(band) + energy_on * 5 + alpha32)
    for _ in range(30):
        n = int(rng.integers(3, 48))
        p = _world(rng, n, band, energy_on, alpha32)
        ranked = packed(p.scores, p.left, band) if band > 0 else p.scores
        usable = rng.integers(0, 9, (n, 3)).astype(np.float64)
        need = np.array([2.0, 1.0, 1.0])
        gang = int(rng.integers(2, min(n, 12) + 1))
        k = int(rng.integers(1, 10))
        want = _leads(ranked, usable, need, gang, p.peers, k, p.value)
        fits = np.isfinite(ranked) & covers(usable, need)
        got = gang_leads(np.asarray(ranked, np.float64), fits, k, gang, *p.args())
        np.testing.assert_array_equal(got, want)


def test_worked_example():
    """Three nodes; quality 0->1 80, 0->2 20, 1->2 60 (both ways), alpha 0.5, compute 60 / 40 / 80,
    composite 70 / 50 / 90. Gang {0, 1}: member 1's mean quality to the other is 80, worth
    0.5 x 40 + 0.5 x 80 = 60; value (70 + 60) / 2 = 65. Gang {2, 1}: 0.5 x 40 + 0.5 x 60 = 50,
    (90 + 50) / 2 = 70. Look-ahead over gangs of two from the two best nodes (2, then 0): 2 leads
    with 1 (its best peer: 0.5 x 40 + 0.5 x 60 = 50 beats 0.5 x 60 + 0.5 x 20 = 40) -> 70; 0 leads
    with 1 (0.5 x 40 + 0.5 x 80 = 60 beats 0.5 x 80 + 0.5 x 20 = 50) -> 65; node 1 is not looked at."""
    q = np.array([[100.0, 80.0, 20.0], [80.0, 100.0, 60.0], [20.0, 60.0, 100.0]])
    scores, compute = np.array([70.0, 50.0, 90.0]), np.array([60.0, 40.0, 80.0])
    args = (scores, q, compute, 0.5, 0.5, 50.0, np.zeros(3), 0.0, np.zeros(3), 0.0, 1.0)
    assert gang_worth(np.array([0, 1]), *args) == 65.0
    assert gang_worth(np.array([2, 1]), *args) == 70.0
    lead = gang_leads(scores, np.ones(3, bool), 2, 2, *args)
    np.testing.assert_array_equal(lead, [65.0, -np.inf, 70.0])
