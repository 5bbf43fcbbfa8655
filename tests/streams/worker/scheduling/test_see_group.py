"""Rescoring a group of one-node tasks at once (migration._see_group) against the rule task by task."""

from types import SimpleNamespace

import numpy as np
import pytest

from streams.worker.scheduling.migration import _saw, _see_group


def test_a_groups_news_is_each_tasks_own_saw():
    """migration._see_group (a group's tasks at once) against _saw task by task: news is a window
    newer than the task saw, NaN (none yet) counting as news, or a new forecast; each has then seen
    the newer of what it saw and the window (a NaN window leaves what it saw)."""
    seen = [-np.inf, np.nan, 100.0, 200.0, 200.0, 50.0, np.nan]
    newest = np.array([np.nan, 150.0, 150.0, 200.0, 250.0, np.nan, np.nan])
    versions = [0, 0, 1, 0, 1, 2, 0]

    def group():
        return [SimpleNamespace(seen_window_end=s, seen_forecast_version=v) for s, v in zip(seen, versions, strict=True)]

    for forecast_version in (0, 1, 2):
        sched = SimpleNamespace(forecast_version=forecast_version)
        a, b = group(), group()
        n = len(a)
        # each task's one endpoint row, at its own column: net.end[row, col] is its newest window
        x = SimpleNamespace(ep_ptr=np.arange(n + 1), ep_idx=np.arange(n))
        net = SimpleNamespace(end=np.diag(newest) + np.where(np.eye(n, dtype=bool), 0.0, np.nan))
        fresh = _see_group(sched, a, x, net, np.arange(n))
        want = [_saw(sched, r, float(newest[t])) for t, r in enumerate(b)]
        assert fresh.tolist() == want
        assert [r.seen_window_end for r in a] == pytest.approx([r.seen_window_end for r in b], nan_ok=True)
        assert [r.seen_forecast_version for r in a] == [r.seen_forecast_version for r in b]
