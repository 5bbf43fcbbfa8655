"""Ablations: the replay again with one ingredient taken away at a time, to say what network
awareness itself adds and what comes from elsewhere (card speeds, data, waiting, moves, estimates).

- ``as-is``: the configuration given (the headline's);
- ``one-site``: every rack at one site (the same nodes and racks; no wide-area network at all);
- ``no-data``: no job loads data;
- ``equal-cards``: every card as fast as the trace's reference card;
- ``static-network``: the network stays as measured (no series over time);
- ``no-migrations``: ours never moves a running job (``ours-static`` in ours' place);
- ``oracle``: every policy is told the trace's durations (what the estimate costs);
- ``first-come``: ours serves its queue by age, as the topology baseline does (what the order adds);
- ``assumed-timing``: jobs timed by the assumed model instead of the measured models (issue 53): a
  communication share drawn from 0.1-0.5 and every job ``fast_speed`` times faster on the newer card;
- ``no-staging``: ours never copies data to the site it places at (issue 53's E2: what data following
  compute adds);
- ``no-reuse``: every data job reads data of its own (no later job finds a staged copy of it);
- ``no-predictions``: ours plans with the requested limits, as topology does, not with run times
  predicted from its users' history (issue 52: what the predictions add);
- ``metered-speeds``: ours costs every task with the cards' metered speeds, as topology does, not with
  its workload's speeds as its runs measured them (issue 52: what learning them adds).

Each is ours against each baseline with the same seeds; a row per variant, baseline and job kind
(completion time: streams/replay/stats.py).
"""

from __future__ import annotations

import dataclasses

from streams.replay.cluster import build_cluster
from streams.replay.results import replay
from streams.replay.stats import EXPOSURE, HEADLINE_BASELINES, compare, exposed

ABLATIONS = ("as-is", "one-site", "no-data", "equal-cards", "static-network", "no-migrations", "oracle", "first-come",
             "assumed-timing", "no-staging", "no-reuse", "no-predictions", "metered-speeds")
KINDS = ("gang", "data", "all")


def variant(name: str, cfg, rtt_series):
    """(config, RTT series, ours' policy name) of one ablation."""
    spec = cfg.cluster
    if name == "one-site":
        spec = dataclasses.replace(spec, sites=1, racks_per_site=spec.sites * spec.racks_per_site)
        return dataclasses.replace(cfg, cluster=spec), None, "ours"
    changes = {"no-data": {"data_share": 0.0}, "equal-cards": {"fast_speed": 1.0}, "oracle": {"estimate": "oracle"},
               "first-come": {"queue_order": "fifo"}, "assumed-timing": {"models": None}, "no-staging": {"staging": False},
               "no-reuse": {"datasets": "job"}, "no-predictions": {"predictions": False},
               "metered-speeds": {"learned_speeds": False}}
    series = None if name == "static-network" else rtt_series
    return dataclasses.replace(cfg, **changes.get(name, {})), series, "ours-static" if name == "no-migrations" else "ours"


# --sweep: the assumed parameters one at a time around the defaults (communication share of a
# multi-node job, gradient bytes per step, a data job's data), to show how the conclusion moves
SWEEP = (
    ("comm 0.05-0.2", {"perf": {"comm_share_low": 0.05, "comm_share_high": 0.2}}),
    ("comm 0.1-0.5", {"perf": {"comm_share_low": 0.1, "comm_share_high": 0.5}}),
    ("comm 0.3-0.7", {"perf": {"comm_share_low": 0.3, "comm_share_high": 0.7}}),
    ("grad 0.25 GB", {"perf": {"grad_gb": 0.25}}),
    ("grad 4 GB", {"perf": {"grad_gb": 4.0}}),
    ("data 100 GB", {"data_gb": 100.0}),
    ("data 2000 GB", {"data_gb": 2000.0}),
)


def swept(changes: dict, cfg, rtt_series):
    perf = dataclasses.replace(cfg.perf, **changes.get("perf", {}))
    rest = {k: v for k, v in changes.items() if k != "perf"}
    if "comm_share_low" in changes.get("perf", {}):
        rest["models"] = None  # a swept share is an assumed one: the measured models give their own
    return dataclasses.replace(cfg, perf=perf, **rest), rtt_series, "ours"


def sweep(trace, paths, cfg, seeds, rtt_series=None, workers: int = 1, progress=None) -> list[dict]:
    """The SWEEP's variants: rows as :func:`ablate`'s, ``ablation`` naming the parameter's value."""
    return run_variants(trace, paths, seeds, [(name, swept(ch, cfg, rtt_series)) for name, ch in SWEEP], workers,
                        progress)


def ablate(trace, paths, cfg, seeds, rtt_series=None, workers: int = 1, names=ABLATIONS, progress=None) -> list[dict]:
    """Every ablation of ``names``: rows of ours (or ours-static) against each baseline, per kind."""
    return run_variants(trace, paths, seeds, [(name, variant(name, cfg, rtt_series)) for name in names], workers,
                        progress)


def run_variants(trace, paths, seeds, variants, workers: int = 1, progress=None) -> list[dict]:
    rows = []
    for name, (c, series, ours) in variants:
        cluster = build_cluster(paths, c.cluster)
        policies = (ours, *HEADLINE_BASELINES)
        run = replay(trace, cluster, c, policies, seeds, rtt_series=None if cluster.series is not None else series,
                     workers=workers)
        kinds = KINDS + (EXPOSURE if exposed(run) else ())  # issue 53's E5: the jobs a change reached apart
        for base in HEADLINE_BASELINES:
            for kind, metric in [(k, "jct") for k in kinds] + [("data", "load")]:
                r = compare(run, ours, base, kind, metric)
                if r is not None:
                    rows.append({"ablation": name, **r, "policy": ours})
        if progress is not None:
            progress(name)
    return rows
