"""Progress bars only on a terminal, never with --quiet, never into a pipe."""

import io

from streams.cli import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_and_none_elsewhere(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a pipe or a file
    assert isinstance(progress.bar(10, "x"), progress.Off)
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert isinstance(progress.bar(10, "x", quiet=True), progress.Off)
    b = progress.bar(10, "replay", unit="job")
    b.update(4)
    b.refresh()  # tqdm redraws at most every 0.1 s on its own
    assert b.n == 4 and "replay" in term.getvalue() and "4/10" in term.getvalue()
    b.close()


def test_the_replay_ticks_once_per_job_that_ends():
    import numpy as np

    from streams.replay.cluster import build_cluster
    from streams.replay.results import replay
    from streams.replay.world import SimConfig
    from tests.streams.replay.test_engine import SPEC, random_trace, two_sites

    t = random_trace(np.random.default_rng(3), 30)
    ticks: list[int] = []
    run = replay(t, build_cluster(two_sites(20.0, 5.0), SPEC), SimConfig(cluster=SPEC), ("ours", "topology"),
                 seeds=(0,), tick=ticks.append)
    # every job of both runs ended (finished, failed or unschedulable), each counted once
    assert all(n >= 1 for n in ticks) and sum(ticks) == 2 * len(t)
    assert len(run.outcomes) == 2
