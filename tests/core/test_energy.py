import numpy as np

from core.energy import blend, energy_scores

nan = float("nan")


def test_energy_score_worked_example():
    # hourly cost: 50 x 1000 / 1000 = 50, 100, 150 x 500 / 1000 = 75 $/h -> scores 100, 0, 50
    # hourly carbon: 400 x 1000, 100 x 1000, unknown -> scores 0, 100, (unknown)
    e = energy_scores([50, 100, 150], [400, 100, nan], [1000, 1000, 500], carbon_weight=0.25)
    assert e.tolist() == [0.75 * 100 + 0.25 * 0, 0.75 * 0 + 0.25 * 100, 50.0]  # the third: cost alone


def test_unknown_and_equal_figures():
    assert energy_scores([nan, nan], [nan, nan], [100, 100]).tolist() == [50.0, 50.0]  # neutral
    assert energy_scores([80, 80], [nan, nan], [100, 100]).tolist() == [100.0, 100.0]  # all equal
    assert energy_scores([80, 40], [nan, nan], [nan, 100]).tolist() == [50.0, 100.0]  # no power: unknown
    assert energy_scores([], [], []).size == 0


def test_blend_leaves_tasks_that_do_not_ask_exactly_as_they_were():
    s = np.array([[70.123, -np.inf, 33.3], [70.123, -np.inf, 33.3]], np.float32)
    out = blend(s, np.array([0.0, 0.5]), np.array([100.0, 100.0, 0.0]))
    assert out.dtype == np.float32
    assert (out[0] == s[0]).all()  # bit for bit
    assert out[1, 1] == -np.inf  # infeasible stays infeasible
    assert np.allclose(out[1], [0.5 * 70.123 + 50, -np.inf, 0.5 * 33.3])


def test_cost_is_per_unit_of_compute_where_compute_is_known():
    # A: 10 kW at 100 $/MWh = 1 $/h for 1000 TFLOPS -> 0.001 $/TFLOPS-h; B: 5 kW = 0.5 $/h for 200
    # TFLOPS -> 0.0025. Per hour B is cheaper; per unit of work A is: scores 100 and 0
    assert energy_scores([100, 100], [nan, nan], [10, 5]).tolist() == [0.0, 100.0]
    assert energy_scores([100, 100], [nan, nan], [10, 5], work_tflops=[1000, 200]).tolist() == [100.0, 0.0]
    # a node without a compute figure (a CPU node) is compared per hour with the others like it:
    # C 0.2 $/h, D 0.4 $/h -> 100, 0; A and B as above
    e = energy_scores([100] * 4, [nan] * 4, [10, 5, 2, 4], work_tflops=[1000, 200, 0, nan])
    assert e.tolist() == [100.0, 0.0, 100.0, 0.0]
    # carbon likewise: 300 g/kWh x 10 kW / 1000 = 3 g per TFLOPS-h against 100 x 5 / 200 = 2.5
    assert energy_scores([nan, nan], [300, 100], [10, 5], work_tflops=[1000, 200]).tolist() == [0.0, 100.0]


def test_blend_is_the_elementwise_formula_on_every_row_shape():
    # the plain formula, row by row, against blend's (it works on the weighted rows only)
    rng = np.random.default_rng(3)
    for t, n in ((0, 4), (5, 0), (6, 7), (1, 1)):
        s = (rng.uniform(0, 100, (t, n))).astype(np.float32)
        if s.size:
            s[rng.uniform(size=s.shape) < 0.2] = -np.inf
            s[rng.uniform(size=s.shape) < 0.1] = np.nan
        w = np.where(rng.uniform(size=t) < 0.5, 0.0, rng.uniform(0, 1, t))
        e = rng.uniform(0, 100, n)
        want = np.empty_like(s)
        for i in range(t):
            for k in range(n):
                v = s[i, k]
                want[i, k] = v if w[i] <= 0 or not np.isfinite(v) else np.float32((1.0 - w[i]) * float(v) + w[i] * e[k])
        got = blend(s, w, e)
        assert got.dtype == np.float32 and got.shape == s.shape
        assert np.array_equal(got, want, equal_nan=True)
        assert got is not s
