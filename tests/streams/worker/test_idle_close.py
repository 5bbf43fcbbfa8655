"""When an idle partition's event time follows the wall clock (streams/worker/ingest.py)."""

import math

from streams.worker.progress import idle_event_time


def test_a_quiet_partition_moves_on_by_the_time_it_has_been_quiet():
    # last message at monotonic 100, its newest sample at 5000.0; 3 s later, idle after 2 s
    assert idle_event_time(103.0, 100.0, 5000.0, 2.0, True, 41, 42) == 5003.0
    assert idle_event_time(103.0, 100.0, 5000.0, 2.0, True, 41, None) == 5003.0  # end not known yet


def test_it_does_not_while_quiet_briefly_empty_or_behind():
    assert idle_event_time(101.0, 100.0, 5000.0, 2.0, True, 41, 42) is None  # quiet 1 s only
    assert idle_event_time(103.0, 100.0, 5000.0, 2.0, False, 41, 42) is None  # nothing open
    assert idle_event_time(103.0, 100.0, -math.inf, 2.0, True, 41, 42) is None  # no sample yet
    # issue 32: 900 messages wait in the broker while the worker is busy elsewhere: a backlog, not a
    # silence; closing its windows by the wall clock made the valid samples behind them late
    assert idle_event_time(103.0, 100.0, 5000.0, 2.0, True, 41, 942) is None
