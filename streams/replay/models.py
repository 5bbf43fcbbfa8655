"""The measured models the replay's jobs are drawn from (issue 53), read from the upstream files as they
are (../shared/data/models, see its README; no converted copies):

- ``pollux/<model>/placements.csv`` (``placement,local_bsz,step_time,sync_time``; a placement is one
  digit per node, the GPUs used there) and ``pollux/<model>/scalability.csv``
  (``num_nodes,num_replicas,local_bsz,step_time,sync_time``): step and gradient-synchronisation times of
  six real models on a real GPU cluster (Qiao et al., "Pollux", OSDI 2021; petuum/adaptdl). A job's
  communication share on n nodes comes from them (core.modelperf.shares_by_nodes).
- ``gavel/simulation_throughputs.json``: steps per second per model, batch size and accelerator
  (Narayanan et al., "Gavel", OSDI 2020; stanford-futuredata/gavel). A job's speed on the newer card
  against the reference card is its model's median V100 / P100 ratio on one card
  (core.modelperf.speed_ratio). The datasheets give V100 / P100 1.48 in fp16 and fp32 without tensor
  cores (31.4 / 21.2 and 15.7 / 10.6 TFLOPS): what the replay's nodes report (SimConfig.fast_speed 1.5);
  the measured ratios per model are the truth the jobs run at.

Pollux and Gavel measured different sets of models. Each Pollux model is paired with the Gavel model
of the same network or the nearest kind; the first two are the same network on the same data, the
rest are ours (``GAVEL_OF``). Bad input: streams.replay.traces.TraceError naming the file, line and field.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.modelperf import shares_at, shares_by_nodes, speed_ratio
from streams.replay.traces import TraceError

GAVEL_OF = {
    "cifar10": "ResNet-18",  # the same network on CIFAR-10 in both
    "imagenet": "ResNet-50",  # the same network on ImageNet in both
    "ncf": "Recommendation",  # collaborative filtering on MovieLens (NeuMF; Gavel's autoencoder)
    "bert": "Transformer",  # attention models (BERT fine-tuning; Gavel's translation Transformer)
    "deepspeech2": "LM",  # recurrent models (speech; Gavel's LSTM language model)
    "yolov3": "CycleGAN",  # convolutional image models (detection; image-to-image)
}
REFERENCE, NEWER = (
    "p100",
    "v100",
)  # Gavel's accelerators standing for the replay's reference and newer card
MAX_NODES = 16  # the largest node count Pollux measured; beyond it a job takes the 16 nodes' share
_GAVEL_KEY = re.compile(
    r"^\('(?P<name>[^']+?)(?: \(batch size (?P<batch>\d+)\))?', (?P<scale>\d+)\)$"
)
_PLACEMENTS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")


@dataclass(frozen=True, eq=False)
class ModelTable:
    """Measured models: their names, communication share by node count and speed on the newer card."""

    names: tuple[str, ...]
    comm: np.ndarray  # float64[M, MAX_NODES + 1] share of a step spent synchronising, by node count
    speed: np.ndarray  # float64[M] throughput on the newer card / on the reference card
    source: str

    def __len__(self) -> int:
        return len(self.names)

    def comm_at(self, model, nodes) -> np.ndarray:
        """float64[J]: each job's communication share for its ``model`` (rows) on ``nodes``."""
        return shares_at(self.comm, model, nodes)


def load_models(root: str | Path) -> ModelTable:
    """The models under ``root`` (pollux/ and gavel/ as upstream ships them); TraceError on bad input."""
    root = Path(root)
    gavel = read_gavel(root / "gavel" / "simulation_throughputs.json")
    names, comm, speed = [], [], []
    for name in sorted(GAVEL_OF):
        nodes, sync, step = read_pollux(root / "pollux" / name)
        comm.append(shares_by_nodes(nodes, sync, step, MAX_NODES))
        if not np.isfinite(comm[-1][2:]).all():
            raise TraceError(f"{root / 'pollux' / name}: no step measured on two or more nodes")
        speed.append(_ratio(gavel, GAVEL_OF[name], root))
        names.append(name)
    return ModelTable(tuple(names), np.array(comm), np.array(speed), str(root))


def read_pollux(model_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nodes int64[R], sync_time float64[R], step_time float64[R]) of every measured step of one
    Pollux model: placements.csv (nodes = digits of the placement) and scalability.csv."""
    nodes, sync, step = [], [], []
    for file, cols in (("placements.csv", _PLACEMENTS), ("scalability.csv", _SCALABILITY)):
        for line, row in _rows(model_dir / file, cols):
            n = (
                _placement_nodes(row, model_dir / file, line)
                if file == "placements.csv"
                else int(_number(row, "num_nodes", model_dir / file, line, whole=True))
            )
            st = _number(row, "step_time", model_dir / file, line, positive=True)
            sy = _number(row, "sync_time", model_dir / file, line)
            if sy > st:
                raise TraceError(
                    f"{model_dir / file}: line {line}: sync_time: {sy} is longer than the step "
                    f"({st})"
                )
            nodes.append(n), sync.append(sy), step.append(st)
    return np.array(nodes, np.int64), np.array(sync), np.array(step)


def read_gavel(path: Path) -> dict[str, dict[tuple[str, int, int], float]]:
    """{accelerator: {(model, batch size or 0, scale): steps per second alone}} from Gavel's file."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: line {exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: expected an object of accelerators")
    out: dict = {}
    for acc, jobs in doc.items():
        if not isinstance(jobs, dict):
            raise TraceError(f"{path}: {acc}: expected an object of jobs")
        for key, inner in jobs.items():
            m = _GAVEL_KEY.match(key)
            if m is None:
                raise TraceError(
                    f"{path}: {acc}: {key!r}: not \"('<model> (batch size B)', scale)\""
                )
            alone = inner.get("null") if isinstance(inner, dict) else None
            if (
                isinstance(alone, bool)
                or not isinstance(alone, int | float)
                or not math.isfinite(alone)
                or alone < 0
            ):
                raise TraceError(
                    f"{path}: {acc}: {key}: null: expected a throughput >= 0, got {alone!r}"
                )
            out.setdefault(acc, {})[(m["name"], int(m["batch"] or 0), int(m["scale"]))] = float(
                alone
            )
    return out


def _ratio(gavel: dict, model: str, root: Path) -> float:
    path = root / "gavel" / "simulation_throughputs.json"
    for acc in (REFERENCE, NEWER):
        if acc not in gavel:
            raise TraceError(f"{path}: no {acc!r} accelerator")
    batches = sorted(
        b
        for (name, b, scale) in gavel[NEWER]
        if name == model and scale == 1 and (name, b, scale) in gavel[REFERENCE]
    )
    r = speed_ratio(
        [gavel[NEWER][(model, b, 1)] for b in batches],
        [gavel[REFERENCE][(model, b, 1)] for b in batches],
    )
    if not math.isfinite(r):
        raise TraceError(
            f"{path}: {model!r}: no throughput on one {NEWER} and one {REFERENCE} at the same batch size"
        )
    return r


def _rows(path: Path, cols: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line, row) of a CSV file with ``cols`` among its columns."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in cols if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(
                    f"{path}: line 1: {missing[0]}: missing column (expected {','.join(cols)})"
                )
            return list(enumerate(reader, start=2))
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None


def _number(
    row: dict, field: str, path: Path, line: int, positive: bool = False, whole: bool = False
) -> float:
    raw = row.get(field)
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: line {line}: {field}: not a number: {raw!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0) or (whole and v != int(v)):
        want = "a whole number" if whole else ("a number > 0" if positive else "a number >= 0")
        raise TraceError(f"{path}: line {line}: {field}: expected {want}, got {raw!r}")
    return v


def _placement_nodes(row: dict, path: Path, line: int) -> int:
    p = (row.get("placement") or "").strip()
    if not p.isdigit() or "0" in p:
        raise TraceError(
            f"{path}: line {line}: placement: expected one digit 1-9 per node, got {p!r}"
        )
    return len(p)
