"""A task's news at rescoring (core.reschedule.news), as a group of one-node tasks (migration._see_group)
and a gang (migration._saw) read it: worked values."""

from types import SimpleNamespace

import numpy as np
import pytest

from streams.worker.scheduling.migration import _saw, _see_group

# what a task saw (window end, forecast version), its newest window, the forecast version now
# -> news?, what it has seen after
CASES = [
    # seen   ver  newest  now  fresh  seen after
    (-np.inf, 0, np.nan, 0, True, -np.inf),  # no window yet: NaN counts as news, nothing seen
    (np.nan, 0, 150.0, 0, True, 150.0),  # nothing seen yet (moved where no path was known): news, then seen
    (100.0, 1, 150.0, 1, True, 150.0),  # a newer window
    (200.0, 0, 200.0, 0, False, 200.0),  # the same window again: no news
    (200.0, 0, 150.0, 0, False, 200.0),  # an older window: no news, seen keeps the newer
    (200.0, 0, 200.0, 1, True, 200.0),  # the same window, a new forecast: news
    (50.0, 2, np.nan, 2, True, 50.0),  # paths unknown now: news, what it saw stays
]


def test_a_groups_news_is_each_tasks_own_worked_value():
    n = len(CASES)
    group = [SimpleNamespace(seen_window_end=c[0], seen_forecast_version=c[1]) for c in CASES]
    newest = np.array([c[2] for c in CASES])
    # each task's one endpoint row, at its own column: net.end[row, col] is its newest window
    net = SimpleNamespace(end=np.diag(newest) + np.where(np.eye(n, dtype=bool), 0.0, np.nan))
    for version in (0, 1, 2):  # one version per call: the cases whose "now" it is
        mine = [t for t, c in enumerate(CASES) if c[3] == version]
        sub = [group[t] for t in mine]
        xs = SimpleNamespace(ep_ptr=np.arange(len(mine) + 1), ep_idx=np.array(mine, np.int64))
        fresh = _see_group(SimpleNamespace(forecast_version=version), sub, xs, net, np.array(mine, np.int64))
        assert fresh.tolist() == [CASES[t][4] for t in mine]
        assert [r.seen_window_end for r in sub] == pytest.approx([CASES[t][5] for t in mine], nan_ok=True)
        assert all(r.seen_forecast_version == version for r in sub)


@pytest.mark.parametrize("case", CASES)
def test_a_gangs_news_is_the_same_worked_value(case):
    seen, ver, newest, now, fresh, after = case
    r = SimpleNamespace(seen_window_end=seen, seen_forecast_version=ver)
    assert _saw(SimpleNamespace(forecast_version=now), r, newest) is fresh
    assert r.seen_window_end == pytest.approx(after, nan_ok=True)
    assert r.seen_forecast_version == now
