"""The small seeded replay whose per-job results are pinned (``replay.json``): the engine may get
faster, never different. Regenerate only for a deliberate change of behaviour:
``python -m tests.streams.replay.golden.case`` (it says what moved)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from streams.analytics.rtt_series import load_dir
from streams.cli.simulate import PHILLY, RTT, SKYPLANE
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.engine import POLICIES
from streams.replay.results import replay
from streams.replay.traces import head, load_philly, load_skyplane
from streams.replay.world import SimConfig

PINNED = Path(__file__).with_name("replay.json")
SPEC = ClusterSpec(sites=3, racks_per_site=2, nodes_per_rack=4, cards_per_node=8, oversubscription=4.0)
JOBS = 200  # the first Philly jobs: a queue forms (a reservation, backfill), gangs move, nodes fail
SEEDS = (0,)


def run_case() -> dict[str, dict[str, list]]:
    """policy/seed -> the outcome's per-job columns, as plain lists."""
    trace = head(load_philly(PHILLY), JOBS)
    cluster = build_cluster(load_skyplane(SKYPLANE / "latency.csv.gz", SKYPLANE / "throughput.csv.gz"), SPEC)
    cfg = SimConfig(cluster=SPEC, epoch_s=1800.0, failures_per_node_day=0.05)
    run = replay(trace, cluster, cfg, POLICIES, SEEDS, rtt_series=load_dir(RTT))
    out = {}
    for (policy, seed), o in run.outcomes.items():
        out[f"{policy}/{seed}"] = {
            "start": o.start.tolist(), "end": o.end.tolist(), "state": list(o.state), "reason": list(o.reason),
            "migrations": o.migrations.tolist(), "restarts": o.restarts.tolist(),
            "migration_s": o.migration_s.tolist(), "preemptions": o.preemptions.tolist(),
            "card_seconds": o.card_seconds,
        }
    return out


def differences(pinned: dict, now: dict) -> list[str]:
    """What moved, a line per policy/seed and column (empty: identical, bit for bit)."""
    lines = []
    for key in sorted(set(pinned) | set(now)):
        a, b = pinned.get(key), now.get(key)
        if a is None or b is None:
            lines.append(f"{key}: only in {'now' if a is None else 'pinned'}")
            continue
        for col in a:
            x, y = np.array(a[col], dtype=object), np.array(b[col], dtype=object)
            if x.shape != y.shape:
                lines.append(f"{key} {col}: {x.shape} vs {y.shape}")
                continue
            same = [(u == v) or (isinstance(u, float) and isinstance(v, float) and u != u and v != v)
                    for u, v in zip(np.atleast_1d(x), np.atleast_1d(y), strict=True)]
            if not all(same):
                first = same.index(False)
                lines.append(f"{key} {col}: {same.count(False)} differ (first job {first}: "
                             f"{np.atleast_1d(x)[first]!r} -> {np.atleast_1d(y)[first]!r})")
    return lines


if __name__ == "__main__":
    now = run_case()
    if PINNED.exists():
        print("\n".join(differences(json.loads(PINNED.read_text()), now)) or "identical")
    if "--write" in sys.argv:
        PINNED.write_text(json.dumps(now, separators=(",", ":")))
        print(f"wrote {PINNED}")
