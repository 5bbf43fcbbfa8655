"""Data that follows compute in the replay (streams/replay/stores.py, issue 53's E2): ours stages a job's
data at the site it runs at, and the user's later jobs there load the copy; planted, numbers by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.results import replay
from streams.replay.traces import JobTrace
from streams.replay.world import SimConfig
from tests.streams.replay.test_engine import QUIET, two_sites

SPEC = ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=1, cards_per_node=8)


def planted() -> JobTrace:
    # job 0 (user x, its data at west) holds west's one node (50,000 s on the reference card, 33,333 on
    # the newer one); jobs 1-3 (user u, 100 GB at west) come while it runs: waiting for west (its
    # requested limit: longer still) costs more than loading 800 s across the 1 Gbit/s WAN: east
    return JobTrace("planted", np.array([0.0, 100.0, 14_000.0, 28_000.0]), np.array([50_000.0, 10_000.0, 10_000.0,
                    10_000.0]), np.array([8, 8, 8, 8]), np.array([1, 1, 1, 1]), ["x", "u", "u", "u"], ["Pass"] * 4,
                    job_type=["training-data-parallel"] * 4, data_gb=np.array([100.0] * 4),
                    data_site=["west"] * 4)


def test_the_first_job_away_from_its_data_stages_it_and_the_users_next_jobs_load_the_copy():
    cluster = build_cluster(two_sites(50.0, 1.0), SPEC)
    cfg = SimConfig(cluster=SPEC, data_share=1.0, models=None, **QUIET)

    def loads(**change) -> np.ndarray:
        run = replay(planted(), cluster, dataclasses.replace(cfg, **change), ("ours", "topology"))
        return run.outcomes[("ours", 0)].load_s

    staged = loads()
    # job 0 at its data's site: over its rack's uplink share (100 GB at 25 Gbit/s: 32 s, 24 s beyond the ideal)
    assert staged[0] == pytest.approx(24.0, rel=0.01)
    # job 1 at east: 100 GB over the 1 Gbit/s WAN (800 s) beyond the ideal 100 Gbit/s (8 s): 792 s
    assert staged[1] == pytest.approx(792.0, rel=0.01)
    # jobs 2 and 3 at east load the copy job 1 left there, as job 0 loaded at west
    assert staged[2:] == pytest.approx([24.0, 24.0], rel=0.01)
    # without staging each pays the WAN; with each job reading data of its own, nothing is reused
    assert loads(staging=False)[1:] == pytest.approx([792.0] * 3, rel=0.01)
    assert loads(datasets="job")[1:] == pytest.approx([792.0] * 3, rel=0.01)
