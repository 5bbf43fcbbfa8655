"""The sink says what it does while it runs: a line a minute with what was read, stored and rejected."""

import logging

from streams.config import Settings
from streams.runtime.sink_runner import WindowSink


def test_a_progress_line_counts_since_the_last_one(caplog, tmp_path):
    sink = WindowSink(Settings(duckdb_path=tmp_path / "x.duckdb"))
    said = (100.0, 0, 0, 0)
    sink.messages, sink.stored, sink.skipped = 1200, 1100, 3
    with caplog.at_level(logging.INFO, logger="streams.runtime.sink_runner"):
        said = sink._progress(said)
        sink.messages, sink.stored = 1500, 1390
        sink._progress(said)
    first, second = [r.getMessage() for r in caplog.records]
    assert first.startswith("sink: 1200 messages read, 1100 new rows stored, 3 rejected in the last")
    assert second.startswith("sink: 300 messages read, 290 new rows stored, 0 rejected") and "(1500, 1390, 3 in all)" in second
