"""What a node agent reads of its machine, as parsers of the text the machine gives (so they are tested
on real output): the accelerators from ``nvidia-smi``'s CSV query, host memory from ``/proc/meminfo``,
a benchmark command's throughput, and the compute report they make together."""

from __future__ import annotations

import math
import re

from core.metering import ACCELERATORS, datasheet_peaks

QUERY = "index,name,memory.total,memory.used,utilization.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm"
BUSY_PCT = 50.0  # a card this busy runs at the clock it can hold now: its current clock shows throttling
NVIDIA_SMI = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]

# nvidia-smi's product names -> the models of the metering's tables (core.metering.ACCELERATORS)
MODELS = (
    (r"H100 80GB HBM3|H100 SXM", "H100-SXM"), (r"H100 PCIe", "H100-PCIE"), (r"H100 NVL", "H100-NVL"),
    (r"H200", "H200-SXM"), (r"A100[- ]SXM", "A100-SXM"), (r"A100.*PCI[Ee]", "A100-PCIE"), (r"L40S", "L40S"),
    (r"V100", "V100"), (r"GB200", "GB200"), (r"B200", "B200"),
)


def _num(text: str) -> float | None:
    """A CSV field as a number; None for nvidia-smi's ``[N/A]``, ``[Not Supported]`` and the like."""
    try:
        v = float(text.strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_nvidia_smi(text: str) -> list[dict]:
    """The GPU rows of ``NVIDIA_SMI``'s output: ``{index, name, mem_mib, used_mib, util_pct, power_w,
    power_limit_w, clock_mhz, max_clock_mhz}`` (None where nvidia-smi has no figure, or an older query
    without the clocks)."""
    out = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 7 or not cols[0].isdigit():
            continue
        clocks = [_num(c) for c in cols[7:9]] + [None, None]
        out.append({"index": int(cols[0]), "name": cols[1], "mem_mib": _num(cols[2]), "used_mib": _num(cols[3]),
                    "util_pct": _num(cols[4]), "power_w": _num(cols[5]), "power_limit_w": _num(cols[6]),
                    "clock_mhz": clocks[0], "max_clock_mhz": clocks[1]})
    return out


def held_clock(g: dict) -> float | None:
    """The SM clock a card can run at now: its current clock when it is busy (``BUSY_PCT``: power
    capping and thermal throttling show there), else its maximum (an idle card clocks down by design:
    its current clock says nothing of how fast it would run)."""
    busy = g.get("util_pct") is not None and g["util_pct"] >= BUSY_PCT
    return g.get("clock_mhz") if busy and g.get("clock_mhz") else g.get("max_clock_mhz")


def _gpu_figures(gpus: list[dict]) -> dict:
    """What the cards' readings add to a report: memory per card, the power limits as the cards' full
    draw (``accel_power_kw``, and ``power_kw`` — the energy score's — unless configured), their draw now
    (``power_draw_kw``), how busy they are (``accel_util``), and the slowest card's held clock as
    ``clock_mhz`` (the metering scales its peaks by clock / boost clock)."""
    out: dict = {}
    mem = [g["mem_mib"] for g in gpus if g["mem_mib"] is not None]
    if mem:
        out["mem_gb"] = round(min(mem) / 1024, 3)
    limits = [g["power_limit_w"] for g in gpus if g["power_limit_w"] is not None]
    if limits:
        out["accel_power_kw"] = out["power_kw"] = round(sum(limits) / 1000, 3)
    draw = [g["power_w"] for g in gpus if g["power_w"] is not None]
    if draw:
        out["power_draw_kw"] = round(sum(draw) / 1000, 3)
    util = [g["util_pct"] for g in gpus if g["util_pct"] is not None]
    if util:  # reported and stored; not scored (it mostly shows the work cnsched placed there)
        out["accel_util"] = round(sum(util) / len(util) / 100, 4)
    clocks = [c for c in (held_clock(g) for g in gpus) if c]
    if clocks:
        out["clock_mhz"] = min(clocks)
    return out


def accel_model(name: str) -> str:
    """The conversion table's model for an nvidia-smi product name (the name itself when unknown)."""
    for pattern, model in MODELS:
        if re.search(pattern, name):
            return model
    return name.removeprefix("NVIDIA ").strip() or "unknown"


def parse_meminfo(text: str) -> tuple[float | None, float | None]:
    """(total, available) host memory in GB from ``/proc/meminfo`` (kB lines)."""
    kb = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            kb[m.group(1)] = int(m.group(2))
    total, avail = kb.get("MemTotal"), kb.get("MemAvailable")
    return (None if total is None else round(total / 1024 ** 2, 3), None if avail is None else round(avail / 1024 ** 2, 3))


def benchmark_value(output: str) -> float | None:
    """The throughput a benchmark command printed: the last number of its output (``12345.6 samples/s``,
    ``throughput=880``); None when it printed none."""
    nums = re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", output)
    v = float(nums[-1]) if nums else None
    return v if v is not None and math.isfinite(v) and v > 0 else None


def machine_report(node: str, now: float, gpus: list[dict], meminfo: tuple[float | None, float | None],
                   cpus: int, config: dict, free_cards: int | None = None, benchmark: dict | None = None) -> dict:
    """A ``compute.nodes`` report of this machine. ``config``: region, zone, rack, tier, and for a node
    without nvidia-smi its ``cards``, ``accel_model``, ``accel_class`` (the configuration wins over
    what is read); ``free_cards``: from the workload manager (Slurm's allocated GRES), else not said
    (cnsched's own books then decide)."""
    report: dict = {"node": node, "ts": now, "status": config.get("status", "up"), "cpus": cpus}
    for key in ("region", "zone", "rack", "tier", "address"):
        if config.get(key):
            report[key] = config[key]
    if gpus:
        model = accel_model(gpus[0]["name"])
        report |= {"cards": len(gpus), "accel_model": model, "gpu_name": gpus[0]["name"]} | _gpu_figures(gpus)
    for key in ("cards", "accel_model", "accel_class", "peak_tflops", "mem_gb", "power_kw", "inter_bw_gbps"):
        if config.get(key) is not None:
            report[key] = config[key]
    # a known model's datasheet fills what neither nvidia-smi nor the configuration said
    peaks, sheet = datasheet_peaks(report.get("accel_model", "")), ACCELERATORS.get(report.get("accel_model", ""))
    if peaks and "peak_tflops" not in report and report.get("cards"):
        report["peak_tflops"] = peaks
    if sheet is not None and "mem_gb" not in report and report.get("cards"):
        report["mem_gb"] = sheet.mem_gb
    total, avail = meminfo
    if total is not None:
        report["host_mem_gb"] = total
    free = {}
    if avail is not None:
        free["host_mem_gb"] = avail
    if free_cards is not None:
        free["cards"] = max(0, min(int(free_cards), int(report.get("cards", 0))))
    if free:
        report["free"] = free
    if benchmark:
        report["benchmarks"] = [benchmark]
    return report
