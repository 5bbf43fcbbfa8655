import pytest

from schemas.windows import WINDOW_ARROW_SCHEMA, WindowResult
from sinks.duckdb_store import SCHEMA_VERSION, DuckStore, StoreError


def result(start, **kw):
    base = dict(src="a", dst="b", metric="rtt_ms", window_start=start, window_end=start + 10,
                count=10, kept=9, outliers=1, lost=0, mean=1.5, p50=1.4, p95=2.0, p99=2.1,
                min=1.0, max=2.2)
    return {**base, **kw}


def test_pydantic_model_and_arrow_schema_agree():
    assert list(WindowResult.model_fields) == WINDOW_ARROW_SCHEMA.names


def test_duplicates_are_stored_once(tmp_path):
    store = DuckStore(tmp_path / "w.duckdb")
    assert store.write_windows([result(0), result(10)]) == 2
    assert store.write_windows([result(10), result(10), result(20)]) == 1  # redelivery + one new
    assert store.query("SELECT window_start FROM windows ORDER BY 1") == [(0.0,), (10.0,), (20.0,)]
    # nothing kept -> null statistics survive the round trip
    store.write_windows([result(30, kept=0, mean=None, p50=None, p95=None, p99=None, min=None, max=None)])
    assert store.query("SELECT mean IS NULL FROM windows WHERE window_start = 30") == [(True,)]
    store.close()


def test_reopen_keeps_data_and_does_not_migrate_twice(tmp_path):
    path = tmp_path / "w.duckdb"
    s = DuckStore(path)
    s.write_windows([result(0)])
    s.close()
    s = DuckStore(path)
    assert s.query("SELECT count(*) FROM windows") == [(1,)]
    assert s.query("SELECT count(*), max(version) FROM schema_version") == [(1, SCHEMA_VERSION)]
    s.close()


def test_corrupt_file_is_a_clear_error_with_recovery(tmp_path):
    path = tmp_path / "bad.duckdb"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="move it away; the sink rebuilds it from the topics"):
        DuckStore(path)
