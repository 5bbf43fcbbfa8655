"""Power-aware starts (core.ramp), with the times worked out by hand; limit 2 MW per 60 s."""

import numpy as np

from core.ramp import earliest_start, ramps

NONE = np.array([])


def test_a_start_that_fits_goes_now():
    assert earliest_start(0.0, 1.0, NONE, NONE, 2.0) == 0.0
    assert earliest_start(5.0, 1.0, np.array([0.0]), np.array([1.0]), 2.0) == 5.0  # 1 + 1 <= 2


def test_a_start_waits_until_earlier_ones_leave_the_window():
    # 1 MW at 0 and at 10: a third at 5 would make 3 MW in (−55, 5]... and (−50, 10]: it waits until
    # the start at 0 leaves the window (60 s); at 60 the window (0, 60] holds the one at 10: 1 + 1 <= 2
    assert earliest_start(5.0, 1.0, np.array([0.0, 10.0]), np.array([1.0, 1.0]), 2.0) == 60.0


def test_a_start_also_keeps_the_windows_of_later_starts():
    # 2 MW booked at 30: a start at 0 would count in (−30, 30] with it (3 MW): first chance 90
    assert earliest_start(0.0, 1.0, np.array([30.0]), np.array([2.0]), 2.0) == 90.0


def test_a_start_over_the_limit_goes_alone():
    assert earliest_start(0.0, 3.0, NONE, NONE, 2.0) == 0.0
    assert earliest_start(0.0, 3.0, np.array([0.0]), np.array([0.5]), 2.0) == 60.0
    assert earliest_start(0.0, 1.0, np.array([0.0]), np.array([3.0]), 2.0) == 60.0  # nothing beside it


def test_no_power_or_no_limit_starts_now():
    assert earliest_start(7.0, 0.0, np.array([7.0]), np.array([5.0]), 2.0) == 7.0
    assert earliest_start(7.0, 1.0, np.array([7.0]), np.array([5.0]), np.inf) == 7.0


def test_ramps_are_rises_over_a_window():
    assert ramps(np.array([1.0, 3.0, 2.0, 6.0])).tolist() == [0.0, 2.0, -1.0, 4.0]
    assert ramps(np.array([1.0, 3.0, 2.0, 6.0]), 2).tolist() == [0.0, 0.0, 1.0, 3.0]
    assert ramps(np.array([])).size == 0 and ramps(np.array([5.0]), 3).tolist() == [0.0]
