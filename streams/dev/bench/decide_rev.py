"""`cnsched bench decide --baseline-rev REV`: the batch (``Scheduler.decide_many``) of ours beside an
older revision of this repository, in one run, on the same cluster and tasks (``bench/decide.py``'s
``_world`` and ``_tasks``, unchanged since 56fcf1d), each revision in a process of its own from a git
worktree; and where our time goes.

Both revisions get the same driver: a full burst on a cluster of the same size first (every kernel
compiled or loaded, whatever the revision's own warm-up covers), then ``rounds`` bursts on fresh
clusters, timed. Where the time goes: one more burst of ours under cProfile, the cumulative time of
each step of a decision as a share of the burst's (cProfile slows Python more than compiled code: the
shares, not the seconds)."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

from streams.dev.bench.revs import REPO, run_driver, worktree

_DRIVER = """
import hashlib, json, sys, time
import streams.dev.bench.decide as bench
from streams.dev.bench.decide import _tasks, _world
n, tasks, rounds, bench.RACK = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
w, now, _ = _world(n, 99)
w.decide_many(_tasks(tasks, 99, "w"), now)
rates, placed, digest = [], [], []
for r in range(rounds):
    s, now, _ = _world(n, r)
    s.nodes(now)
    burst = _tasks(tasks, r, "t")
    t = time.perf_counter()
    d = s.decide_many(burst, now)
    rates.append(tasks / (time.perf_counter() - t))
    placed.append(sum(x.status == "placed" for x in d))
    digest.append(hashlib.sha1(json.dumps([x.nodes for x in d]).encode()).hexdigest())
print(json.dumps({"per_s": rates, "placed": placed, "digest": digest}))
"""

# the steps of a decision, by the function that does each (cumulative; a step inside another is
# taken out of it: the path table is built inside the first scoring)
STEPS = {
    "path table (once per burst)": ("path_table.py", "build_path_table"),
    "scoring kernel and inputs": ("batch.py", "__init__"),
    "one worker placed in seconds": ("seconds.py", "single"),
    "gang placed in seconds": ("seconds.py", "gang"),
    "costing setup (loads, price)": ("seconds.py", "__init__"),
    "filters and scores per task": ("scoring.py", "task_reasons"),
    "decision record": ("decision.py", "decision"),
}


def _run(code: Path, nodes: int, tasks: int, rounds: int, rack: int) -> dict:
    return run_driver(code, _DRIVER, nodes, tasks, rounds, rack)


def where_time_goes(nodes: int, tasks: int, rack: int) -> dict[str, float]:
    """Share of one burst's time (ours, under cProfile) per step of :data:`STEPS`, and the rest."""
    from streams.dev.bench.decide import _tasks, _world

    w, now, _ = _world(nodes, 98, rack=rack)
    w.decide_many(_tasks(tasks, 98, "w"), now)
    s, now, _ = _world(nodes, 97, rack=rack)
    s.nodes(now)
    burst = _tasks(tasks, 97, "p")
    prof = cProfile.Profile()
    prof.runcall(s.decide_many, burst, now)
    stats = pstats.Stats(prof).stats  # (file, line, function) -> (calls, ..., total, cumulative, callers)
    total = sum(v[2] for v in stats.values())
    cum = {name: sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(file) and fn == func)
           for name, (file, func) in STEPS.items()}
    cum["scoring kernel and inputs"] -= cum["path table (once per burst)"]
    shares = {k: round(v / total, 3) for k, v in cum.items()}
    shares["the rest (queue, filters' masks, books, Python)"] = round(1 - sum(shares.values()), 3)
    return shares


def bench_decide_rev(baseline_rev: str, node_counts, tasks: int, rounds: int, rack: int = 8) -> dict:
    out: dict = {"tasks_per_burst": tasks, "rounds": rounds, "baseline_rev": baseline_rev, "rack_size": rack}
    with worktree(baseline_rev, "cnsched-bench-decide-") as old:
        for n in node_counts:
            ours, base = _run(REPO, n, tasks, rounds, rack), _run(old, n, tasks, rounds, rack)
            best_ours, best_base = max(ours["per_s"]), max(base["per_s"])
            out[f"nodes_{n}"] = {
                "ours_per_s": round(best_ours, 1), f"{baseline_rev}_per_s": round(best_base, 1),
                "ratio_ours_over_baseline": round(best_ours / best_base, 2),
                "ours_placed": ours["placed"][0], f"{baseline_rev}_placed": base["placed"][0],
                "same_decisions": ours["digest"] == base["digest"],
                "where_ours_goes": where_time_goes(n, tasks, rack),
            }
    return out
