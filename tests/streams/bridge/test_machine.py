"""A node agent's view of its machine, on real readings: nvidia-smi of real H100 servers (fixtures,
tests/fixtures/nvidia/README.md), /proc/meminfo of this machine's kind, a benchmark's output; the
report they make is one the worker accepts, and it is not flagged as lacking compute figures."""

from pathlib import Path

from core.metering import ACCELERATORS, DEFAULT_MODEL_CONVERSION, clock_factor
from schemas.compute import ComputeReport
from streams.adapters.inventory import NO_COMPUTE_FIGURES, compute_warnings
from streams.bridge.machine import (
    accel_model,
    benchmark_value,
    machine_report,
    parse_meminfo,
    parse_nvidia_smi,
)

FIX = Path(__file__).parents[2] / "fixtures" / "nvidia"
NOW = 1_764_601_445.0
MEMINFO = "MemTotal:       24683204 kB\nMemFree:         1234567 kB\nMemAvailable:   20971520 kB\nBuffers: 1 kB\n"


def test_real_nvidia_smi_readings():
    sxm = parse_nvidia_smi((FIX / "h100_sxm_idle.csv").read_text())
    assert [(g["index"], g["name"], g["mem_mib"], g["used_mib"], g["power_w"], g["power_limit_w"]) for g in sxm] == [
        (0, "NVIDIA H100 80GB HBM3", 81559.0, 0.0, 88.0, 700.0), (1, "NVIDIA H100 80GB HBM3", 81559.0, 0.0, 83.0, 700.0)]
    busy = parse_nvidia_smi((FIX / "h100_pcie_busy.csv").read_text())
    assert [g["used_mib"] for g in busy] == [3881.0, 661.0] and {g["util_pct"] for g in busy} == {100.0}
    (odd,) = parse_nvidia_smi((FIX / "unified_memory.csv").read_text())
    assert (odd["mem_mib"], odd["power_w"], odd["util_pct"]) == (None, None, 3.0)
    assert parse_nvidia_smi("") == [] and parse_nvidia_smi("NVIDIA-SMI has failed\n") == []
    names = [g["name"] for f in ("h100_sxm_idle", "h100_pcie_busy", "h100_nvl") for g in
             parse_nvidia_smi((FIX / f"{f}.csv").read_text())]
    assert [accel_model(n) for n in names[::2]] == ["H100-SXM", "H100-PCIE", "H100-NVL"]
    assert accel_model("NVIDIA A100-SXM4-80GB") == "A100-SXM" and accel_model("Tesla V100-SXM2-16GB") == "V100"


def test_meminfo_and_a_benchmarks_output():
    assert parse_meminfo(MEMINFO) == (round(24683204 / 1024 ** 2, 3), 20.0)
    assert parse_meminfo("") == (None, None)
    assert benchmark_value("step 100/100\nthroughput: 1234.5 samples/s\n") == 1234.5
    assert benchmark_value("tokens/s=8.8e3") == 8800.0 and benchmark_value("failed") is None
    assert benchmark_value("rate: 0") is None  # no throughput is not a throughput


def test_the_report_of_an_h100_server_is_accepted_and_carries_compute_figures():
    gpus = parse_nvidia_smi((FIX / "h100_sxm_idle.csv").read_text())
    r = machine_report("gpu-01", NOW, gpus, parse_meminfo(MEMINFO), 2, {"zone": "dc1", "rack": "r7", "tier": "centre"},
                       free_cards=1, benchmark={"name": "resnet50-train", "value": 2900.0, "measured_at": NOW})
    assert (r["cards"], r["accel_model"], r["mem_gb"], r["free"]["cards"], r["accel_power_kw"]) == (
        2, "H100-SXM", round(81559 / 1024, 3), 1, 1.4)
    assert r["peak_tflops"]["fp16"] == 1979.0 and r["free"]["host_mem_gb"] == 20.0 and r["rack"] == "r7"
    ComputeReport.model_validate(r)
    assert compute_warnings(r, 1.0) == []  # its peaks make it comparable with other cards
    plain = machine_report("cpu-01", NOW, [], (64.0, 60.0), 32, {"cards": 0})
    assert plain["cards"] == 0 and "free" in plain and "cards" not in plain["free"]
    configured = machine_report("acc-01", NOW, [], (None, None), 8, {"cards": 4, "accel_class": "npu"}, free_cards=9)
    assert (configured["cards"], configured["accel_class"], configured["free"]["cards"]) == (4, "npu", 4)


def test_a_node_without_nvidia_smi_gets_its_models_datasheet_and_an_unknown_model_is_named():
    """Issue 55 item 4: ``--cards 8 --accel-model A100-SXM`` without nvidia-smi filled nothing (every node
    scored alike); an unknown name (``H100``) went unremarked."""
    from streams.adapters.inventory import scored

    a100 = machine_report("a-01", NOW, [], (None, None), 8, {"cards": 8, "accel_model": "A100-SXM"})
    assert a100["peak_tflops"] == {"fp32": 19.5, "fp16": 312.0, "int8": 624.0} and a100["mem_gb"] == 80.0
    gaudi = machine_report("g-01", NOW, [], (None, None), 8, {"cards": 8, "accel_model": "Gaudi3", "mem_gb": 96})
    assert gaudi["peak_tflops"] == {"fp16": 1835.0} and gaudi["mem_gb"] == 96  # the configuration wins
    h100 = machine_report("h-01", NOW, [], (None, None), 8, {"cards": 8, "accel_model": "H100"})
    assert "peak_tflops" not in h100 and "mem_gb" not in h100
    rows = {r["node"]: r for r in scored([{**x, "received_at": NOW} for x in (a100, gaudi, h100)],
                                         DEFAULT_MODEL_CONVERSION, {}, NOW, 60.0)}
    assert rows["a-01"]["warnings"] == [] and rows["g-01"]["warnings"] == []
    unknown, no_figures = rows["h-01"]["warnings"]
    assert unknown.startswith("accel_model 'H100' is not a model cnsched knows (A100-PCIE, A100-SXM, B200")
    assert no_figures == NO_COMPUTE_FIGURES


def test_the_datasheets_in_dense_units():
    """Every model's datasheet peaks turned dense by the conversion table: H100 PCIe's 1,513 sparse fp16
    TFLOPS are 756.5 dense (it was counted sparse, twice an A100's share too many), MI300X's 1,307.4
    dense stay; each model has a fp16 figure and its memory."""
    for model, a in ACCELERATORS.items():
        assert a.peaks["fp16"] > 0 and a.mem_gb > 0 and a.source, model
        assert DEFAULT_MODEL_CONVERSION[model]["fp16"] == (0.5 if a.sparse else 1.0)
    dense = {m: ACCELERATORS[m].peaks["fp16"] * DEFAULT_MODEL_CONVERSION[m]["fp16"]
             for m in ("A100-SXM", "H100-PCIE", "H100-SXM", "H200-SXM", "B200", "MI300X")}
    assert dense == {"A100-SXM": 312.0, "H100-PCIE": 756.5, "H100-SXM": 989.5, "H200-SXM": 989.5, "B200": 2250.0,
                     "MI300X": 1307.4}


def test_the_agent_reads_nvidia_smi_proc_and_its_benchmark(tmp_path):
    """The agent runs a real executable in nvidia-smi's place (it prints a real server's readings) and
    a real benchmark command, and reads this machine's /proc."""
    from streams.bridge.node_agent import NodeAgent

    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {FIX / 'h100_sxm_idle.csv'}\n")
    smi.chmod(0o755)
    agent = NodeAgent("gpu-01", {"zone": "dc1"}, nvidia_smi=[str(smi)], benchmark_cmd="echo 'step 10'; echo '2950.5 samples/s'",
                      benchmark_name="resnet50-train", clock=lambda: NOW)
    r = agent.report(NOW, wait_benchmark=True)
    assert (r["cards"], r["accel_model"], r["zone"]) == (2, "H100-SXM", "dc1")
    assert r["benchmarks"] == [{"name": "resnet50-train", "value": 2950.5, "unit": "samples/s", "measured_at": NOW}]
    assert r["host_mem_gb"] > 0 and 0 < r["free"]["host_mem_gb"] <= r["host_mem_gb"]  # this machine's /proc
    agent.benchmark_cmd = "echo nothing"
    assert agent.report(NOW + 10)["benchmarks"][0]["value"] == 2950.5  # not due again: the last measurement stands
    broken = NodeAgent("gpu-02", nvidia_smi=[str(tmp_path / "missing-smi")], config={"cards": 4, "accel_class": "npu"})
    assert broken.report(NOW)["cards"] == 4  # configured cards when there is no nvidia-smi


def test_a_long_benchmark_never_delays_a_report():
    """Issue 55 item 3: the benchmark ran inside the report, so one longer than the node timeout made the
    node look failed. It runs beside the reports now: they go on at once, it joins them when done."""
    import time

    from streams.bridge.node_agent import NodeAgent

    agent = NodeAgent("gpu-03", {"cards": 8, "accel_model": "A100-SXM"}, benchmark_cmd="sleep 2; echo 900 samples/s",
                      benchmark_name="resnet50-train")
    began = time.monotonic()
    reports = [agent.report(NOW + k) for k in range(3)]
    assert time.monotonic() - began < 1.0 and all("benchmarks" not in r for r in reports)  # not waited for
    agent._thread.join(timeout=10)
    assert agent.report(NOW + 5)["benchmarks"][0]["value"] == 900.0  # measured: in the next report
    slow = NodeAgent("gpu-04", {"cards": 8}, benchmark_cmd="sleep 90; echo 1 samples/s")
    slow.report(NOW)
    began = time.monotonic()
    slow.close()  # the agent stops: the 90 s benchmark with it
    slow._thread.join(timeout=10)
    assert not slow._thread.is_alive() and time.monotonic() - began < 5 and slow._benchmark is None


def test_clocks_power_and_utilisation_reach_the_report_and_the_metering():
    # constructed rows in the agent's nine-column form (the fixtures are real readings of the older seven)
    row = "{i}, NVIDIA H100 80GB HBM3, 81559, 40000, {util}, {draw}, 700.00, {clock}, 1980"
    busy = parse_nvidia_smi("\n".join(row.format(i=i, util=100, draw=690.0, clock=c) for i, c in enumerate((1980, 1485))))
    assert [(g["clock_mhz"], g["max_clock_mhz"]) for g in busy] == [(1980.0, 1980.0), (1485.0, 1980.0)]
    r = machine_report("gpu-02", NOW, busy, (None, None), 2, {})
    # the slower card holds 1,485 MHz under load: the node's peaks run at 1,485 / 1,980 = 0.75 of the datasheet's
    assert (r["clock_mhz"], r["power_kw"], r["power_draw_kw"], r["accel_util"]) == (1485.0, 1.4, 1.38, 1.0)
    ComputeReport.model_validate(r)
    assert clock_factor(r["accel_model"], r["clock_mhz"]) == 0.75
    # idle cards clock down by design: their maximum is what they would run at, nothing is scaled
    idle = parse_nvidia_smi("\n".join(row.format(i=i, util=0, draw=80.0, clock=345) for i in range(2)))
    assert machine_report("gpu-03", NOW, idle, (None, None), 2, {})["clock_mhz"] == 1980.0
    # a configured full-load draw wins over the cards' limits; the seven-column form has no clock
    old = parse_nvidia_smi((FIX / "h100_sxm_idle.csv").read_text())
    r = machine_report("gpu-04", NOW, old, (None, None), 2, {"power_kw": 10.2})
    assert r["power_kw"] == 10.2 and r["accel_power_kw"] == 1.4 and "clock_mhz" not in r
