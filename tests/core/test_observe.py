import math

import numpy as np
import pytest

from core.observe import ProbeModel, draw_probes, observe, observe_medians, window_results
from core.windowstats import window_stats_reference


def test_matches_the_exact_window_statistics_row_by_row():
    rng = np.random.default_rng(4)
    samples = draw_probes(rng.uniform(0.1, 300, 50), rng.uniform(0, 0.3, 50), ProbeModel(), rng)
    got = window_results(samples)
    for i, row in enumerate(samples):
        want = window_stats_reference(row)
        assert (got["count"][i], got["lost"][i], got["kept"][i], got["outliers"][i]) == (
            want["count"], want["lost"], want["kept"], want["outliers"])
        for f in ("mean", "p50", "p95", "p99"):
            assert got[f][i] == pytest.approx(want[f], rel=1e-9, nan_ok=True), f


def test_worked_example_and_degenerate_rows():
    # 1, 2, 3 and a 100 ms spike: median 2.5, MAD 1.0 -> cut at 3 x 1.4826 = 4.4478 from the median:
    # 100 is an outlier; kept 1, 2, 3: mean 2, p50 2; one probe lost
    r = window_results(np.array([[1.0, 2.0, 3.0, 100.0, np.nan]]))
    assert (r["count"][0], r["lost"][0], r["kept"][0], r["outliers"][0]) == (5, 1, 3, 1)
    assert r["mean"][0] == 2.0 and r["p50"][0] == 2.0 and r["loss"][0] == 0.2
    lost = window_results(np.full((1, 4), np.nan))  # every probe lost
    assert lost["lost"][0] == 4 and math.isnan(lost["p95"][0]) and lost["loss"][0] == 1.0
    const = window_results(np.full((1, 6), 0.5))  # MAD 0: nothing removed
    assert const["outliers"][0] == 0 and const["p99"][0] == 0.5
    assert window_results(np.zeros((0, 10)))["mean"].shape == (0,)


def test_observations_are_seeded_and_centred_on_the_truth():
    m = ProbeModel(probes=2000, jitter=0.05, spike_share=0.02)
    a = observe(np.array([10.0, 200.0]), np.array([0.0, 0.1]), m, seed=1)
    b = observe(np.array([10.0, 200.0]), np.array([0.0, 0.1]), m, seed=1)
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert a["p50"] == pytest.approx([10.0, 200.0], rel=0.01)  # the spikes are removed
    # p95 of lognormal(0, 0.05) around the truth: exp(1.645 x 0.05) = 1.0857
    assert a["p95"] == pytest.approx([10.857, 217.1], rel=0.02)
    assert a["loss"][0] == 0.0 and a["loss"][1] == pytest.approx(0.1, abs=0.02)


def row_quantiles(x: np.ndarray, qs) -> np.ndarray:
    """The reference the window kernel replaced (kept here, where it is used): float64[len(qs),
    rows]: each row's quantiles ignoring NaN (numpy's linear method, as
    ``np.nanquantile(x, qs, axis=1)``; NaN for a row without values), by one sort of all rows."""
    x = np.asarray(x, np.float64)
    rows = x.shape[0]
    if x.size == 0:
        return np.full((len(qs), rows), np.nan)
    s = np.sort(x, axis=1)  # NaN last
    n = (~np.isnan(x)).sum(axis=1)
    r = np.arange(rows)
    out = np.full((len(qs), rows), np.nan)
    for k, q in enumerate(qs):
        pos = q * np.maximum(n - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        v = s[r, lo] + (pos - lo) * (s[r, hi] - s[r, lo])
        out[k] = np.where(n > 0, v, np.nan)
    return out


def test_row_quantiles_match_numpy_nanquantile_with_nan_empty_and_constant_rows():

    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 1, (50, 37))
    x[rng.random(x.shape) < 0.3] = np.nan
    x[3] = np.nan  # a row of lost probes only
    x[4] = 2.5  # constant
    x[5, 1:] = np.nan  # one value
    qs = [0.0, 0.5, 0.95, 0.99, 1.0]
    with np.errstate(invalid="ignore"), __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        want = np.nanquantile(x, qs, axis=1)
    np.testing.assert_allclose(row_quantiles(x, qs), want, rtol=1e-12, equal_nan=True)
    assert row_quantiles(np.zeros((0, 5)), qs).shape == (5, 0)
    assert row_quantiles(np.zeros((3, 0)), qs).shape == (5, 3)


def numpy_window_results(x, hampel_k=3.0):
    """The numpy composition window_results replaced (Hampel over nanquantile, then nanmean): its
    values must come out bit for bit, or the replay's pinned results move."""
    from core.vocabulary import MAD_TO_SIGMA

    with np.errstate(invalid="ignore"), __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        med = row_quantiles(x, [0.5])[0][:, None]
        mad = row_quantiles(np.abs(x - med), [0.5])[0][:, None]
        keep = ~np.isnan(x) & ((mad == 0) | (np.abs(x - med) <= hampel_k * MAD_TO_SIGMA * mad))
        kept = np.where(keep, x, np.nan)
        q = row_quantiles(kept, [0.5, 0.95, 0.99])
        return {"mean": np.nanmean(kept, axis=1), "p50": q[0], "p95": q[1], "p99": q[2], "kept": keep.sum(axis=1)}


@pytest.mark.parametrize("width", [1, 2, 7, 8, 9, 15, 16, 100, 127, 128, 129, 300, 1000, 2049])
def test_the_one_pass_kernel_equals_the_numpy_composition_bit_for_bit(width):
    rng = np.random.default_rng(width)
    x = rng.lognormal(3, 1, (40, width)) * np.where(rng.random((40, width)) < 0.05, 10.0, 1.0)
    x[rng.random(x.shape) < 0.2] = np.nan
    x[0] = np.nan  # every probe lost
    x[1] = 7.25  # constant: MAD 0, nothing removed
    x[2, :] = np.round(x[2, :])  # ties
    got, want = window_results(x), numpy_window_results(x)
    for f in ("mean", "p50", "p95", "p99", "kept"):
        np.testing.assert_array_equal(got[f], want[f], err_msg=f)  # equal, not close
    assert np.isnan(got["p95"][0]) and got["p99"][1] == 7.25


def test_the_compiled_draw_is_numpys_lognormal_spikes_and_losses_bit_for_bit():
    """draw_probes against the plain numpy composition it replaced, same seed: per-path and model
    jitter, spikes, losses from none to all, one path and none."""
    def numpy_draw(rtt, loss, model, rng, jitter=None):
        rtt = np.asarray(rtt, np.float64)[:, None]
        shape = (rtt.shape[0], model.probes)
        sigma = model.jitter if jitter is None else np.asarray(jitter, np.float64)[:, None]
        x = rtt * rng.lognormal(0.0, sigma, shape)
        x = np.where(rng.random(shape) < model.spike_share, x * model.spike_factor, x)
        return np.where(rng.random(shape) < np.asarray(loss, np.float64)[:, None], np.nan, x)

    gen = np.random.default_rng(2)
    for n, model in ((40, ProbeModel()), (1, ProbeModel(probes=7, spike_share=0.5)), (0, ProbeModel()),
                     (25, ProbeModel(probes=33, jitter=0.3, spike_factor=3.0))):
        rtt, loss, jitter = gen.uniform(0.05, 300, n), gen.choice([0.0, 0.1, 1.0], n), gen.uniform(0.0, 0.4, n)
        for j in (None, jitter):
            for seed in (0, 1):
                got = draw_probes(rtt, loss, model, np.random.default_rng(seed), j)
                want = numpy_draw(rtt, loss, model, np.random.default_rng(seed), j)
                assert got.shape == (n, model.probes) and np.array_equal(got, want, equal_nan=True)
    assert np.isnan(draw_probes([5.0], [1.0], ProbeModel(), gen)).all()  # a path losing everything


def test_the_medians_only_pass_gives_the_full_windows_fields_bit_for_bit():
    """observe_medians (what the replay reads) against the full window results of the
    same draws: count, lost, loss, p50 and p95 equal, over spikes, losses from none to all, constant
    rows (jitter 0: MAD 0), one path and none."""
    gen = np.random.default_rng(5)
    for n, model in ((60, ProbeModel()), (1, ProbeModel(probes=7, spike_share=0.5)), (0, ProbeModel()),
                     (30, ProbeModel(probes=33, jitter=0.3, spike_factor=3.0)), (5, ProbeModel(jitter=0.0))):
        rtt, loss = gen.uniform(0.05, 300, n), gen.choice([0.0, 0.1, 0.9, 1.0], n)
        for jitter in (None, gen.uniform(0.0, 0.4, n)):
            full = observe(rtt, loss, model, 11, jitter)
            fast = observe_medians(rtt, loss, model, 11, jitter)
            assert sorted(fast) == ["count", "loss", "lost", "p50", "p95"]
            for f in fast:
                np.testing.assert_array_equal(fast[f], full[f], err_msg=f)
    const = observe_medians(np.array([4.0]), np.array([0.0]), ProbeModel(jitter=0.0, spike_share=0.0), 1)
    assert const["p50"][0] == const["p95"][0] == 4.0 and const["lost"][0] == 0
