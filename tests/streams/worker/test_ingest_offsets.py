"""Which messages of a step follow on from the window state without a hole (streams/worker/ingest.py):
a consumer that jumped past messages the state never applied is sent back (issue 32)."""

from streams.worker.ingest import contiguous


def test_repeats_follow_on_and_jumps_do_not():
    assert contiguous([5, 6, 7], 4) == 3  # the next ones
    assert contiguous([3, 4, 5, 6], 4) == 4  # replayed, then new
    assert contiguous([5, 6, 9, 10], 4) == 2  # 7 and 8 never came: the step stops before 9
    assert contiguous([7, 8], 4) == 0  # 5 and 6 never came
    assert contiguous([], 4) == 0


def test_a_fresh_partition_starts_anywhere_then_must_follow_on():
    assert contiguous([10, 11], -1) == 2
    assert contiguous([10, 12], -1) == 1
