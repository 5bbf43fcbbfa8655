"""Fixtures of the integration tests that run a real Slurm (test_slurm.py, test_slurm_runners.py)."""

import pytest

from streams.runtime.slurm_cluster import SlurmCluster


@pytest.fixture
def slurm(tmp_path):
    """A real three-node Slurm on this machine (streams/runtime/slurm_cluster.py), stopped after the test."""
    cluster = SlurmCluster(tmp_path / "slurm").start()
    try:
        yield cluster
    finally:
        cluster.stop()
