import numpy as np
import pytest

from core.metering import DEFAULT_BENCHMARK_WORK, DEFAULT_MODEL_CONVERSION
from streams.adapters.inventory import (
    NO_COMPUTE_FIGURES,
    is_available,
    node_metrics,
    scored,
)
from streams.adapters.network import merge_window, path_inputs

NOW = 1_800_000_000.0


def test_availability_by_status_and_silence():
    assert is_available({"status": "up", "received_at": NOW - 59}, NOW, 60)
    assert not is_available({"status": "up", "received_at": NOW - 61}, NOW, 60)  # silent too long
    # leaving: still up, running its work while it drains (the scheduler closes it to new work)
    assert is_available({"status": "leaving", "received_at": NOW}, NOW, 60)
    assert not is_available({"status": "down", "received_at": NOW}, NOW, 60)


def test_reports_to_arrays_convert_peaks_and_pick_the_freshest_known_benchmark():
    reports = [
        {"node": "a", "accel_model": "H100-SXM", "cards": 8, "peak_tflops": {"fp16": 1979},
         "benchmarks": [{"name": "llama-7b-train", "value": 70000, "measured_at": NOW - 7200},
                        {"name": "llama-7b-train", "value": 80000, "measured_at": NOW - 60},
                        {"name": "secret-bench", "value": 1, "measured_at": NOW}]},
        {"node": "b", "cards": 0},
    ]
    m, classes = node_metrics(reports, DEFAULT_MODEL_CONVERSION, DEFAULT_BENCHMARK_WORK, NOW)
    assert classes == ["H100-SXM", "cpu"]
    assert m.peak_factor[0].tolist() == [1.0, 0.5, 0.5]  # sparse-stated fp16/int8 -> dense
    assert m.bench_value[0] == 80000 and m.bench_age_s[0] == 60  # freshest known benchmark
    assert m.bench_work[0] == DEFAULT_BENCHMARK_WORK["llama-7b-train"]
    assert np.isnan(m.bench_value[1]) and m.availability.tolist() == [1.0, 1.0]


def test_tensor_cores_and_clock_fill_a_missing_peak_and_scale_a_slow_card():
    from core.metering import compute_capability

    reports = [
        # no peak stated: 432 tensor cores x 1,410 MHz x 512 FLOP per clock = 311.9 dense TFLOPS a card
        {"node": "a", "accel_model": "A100-SXM", "cards": 8, "tensor_cores": 432, "clock_mhz": 1410},
        # stated sparse 1,979 at fp16 (x 0.5 dense), running at 1,485 of its 1,980 MHz boost: x 0.75
        {"node": "b", "accel_model": "H100-SXM", "cards": 8, "peak_tflops": {"fp16": 1979}, "clock_mhz": 1485},
        # an unknown model: neither figure can be used
        {"node": "c", "accel_model": "X1", "cards": 8, "tensor_cores": 100, "clock_mhz": 1000},
    ]
    m, _ = node_metrics(reports, DEFAULT_MODEL_CONVERSION, DEFAULT_BENCHMARK_WORK, NOW)
    assert m.peak[0, 1] == pytest.approx(432 * 1410e6 * 512 / 1e12) and m.peak_factor[0, 1] == 1.0
    assert m.peak_factor[1].tolist() == pytest.approx([0.75, 0.375, 0.375])
    assert np.isnan(m.peak[2, 1]) and m.peak_factor[2].tolist() == [1.0, 1.0, 1.0]
    cap = compute_capability(m, 1)  # fp16, x cards x peak efficiency
    assert cap[1] / cap[0] == pytest.approx(1979 * 0.375 / 311.88672, rel=1e-4)


def test_unavailable_nodes_lose_their_quality_dimension():
    rec = {"node": "a", "cards": 1, "peak_tflops": {"fp16": 100}, "availability": 1.0, "idle_rate": 1.0,
           "queue_delay_s": 0.0}
    up = scored([{**rec, "received_at": NOW}], {}, {}, NOW, 60)[0]
    gone = scored([{**rec, "received_at": NOW - 3600}], {}, {}, NOW, 60)[0]
    assert up["available"] and not gone["available"]
    assert up["dimensions"]["generic"]["quality"] == pytest.approx(100.0)
    assert gone["dimensions"]["generic"]["quality"] == pytest.approx(50.0)  # 0.3 idle + 0.2 queue


def test_newest_window_wins_and_inputs_fall_back_to_the_busier_endpoint():
    w = {"src": "a", "dst": "b", "metric": "rtt_ms", "window_start": 0.0, "window_end": 10.0, "count": 10,
         "kept": 10, "outliers": 0, "lost": 2, "mean": 1.0, "p50": 1.0, "p95": 3.0, "p99": 3.0, "min": 1.0, "max": 3.0}
    rec = merge_window(None, w)
    rec = merge_window(rec, {**w, "window_start": -10.0, "window_end": 0.0, "p95": 99.0})  # older: ignored
    assert rec["metrics"]["rtt_ms"]["p95"] == 3.0
    nodes = {"a": {"metrics": {"bw_util": {"mean": 0.3}}}, "b": {"metrics": {"bw_util": {"mean": 0.8}}}}
    x = path_inputs([rec], nodes)
    assert x["bw_util"][0] == 0.8 and x["loss"][0] == 0.2 and x["jitter_ms"][0] == 2.0
    assert np.isnan(x["retrans"][0])


def test_accelerator_nodes_without_compute_figures_are_flagged():
    """An H100 and an L40S that report no peaks score alike: the answer says why, for each."""
    base = {"cards": 8, "mem_gb": 80, "host_mem_gb": 1024, "inter_bw_gbps": 400, "received_at": NOW, "ts": NOW}
    reports = [{"node": "h100", "accel_model": "H100-SXM", **base}, {"node": "l40s", "accel_model": "L40S", **base},
               {"node": "ok", "accel_model": "H100-SXM", "peak_tflops": {"fp16": 989}, **base},
               {"node": "cpu", "cards": 0, "received_at": NOW, "ts": NOW}]
    alone = scored(reports[:2], DEFAULT_MODEL_CONVERSION, DEFAULT_BENCHMARK_WORK, NOW, 60)
    assert alone[0]["compute_score"] == alone[1]["compute_score"]  # what the warning is about
    got = {x["node"]: x for x in scored(reports, DEFAULT_MODEL_CONVERSION, DEFAULT_BENCHMARK_WORK, NOW, 60)}
    assert got["h100"]["warnings"] == got["l40s"]["warnings"] == [NO_COMPUTE_FIGURES]
    assert got["ok"]["warnings"] == [] and got["cpu"]["warnings"] == []
