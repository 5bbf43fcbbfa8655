import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from schemas.probe import (
    REASON_OUT_OF_RANGE,
    REASON_SCHEMA,
    DecodeError,
    decode_samples,
    encode_arrow,
)
from schemas.probe_validation import validate_batch

NOW = 1_732_860_000.0


def rows_of(payload):
    return decode_samples(payload).rows()


def test_three_encodings_decode_to_the_same_rows():
    samples = [
        {"ts": NOW, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": 0.42},
        {"ts": NOW + 0.001, "src": "n01", "dst": "", "metric": "bw_util", "value": 0.5},
        {"ts": NOW + 0.002, "src": "n01", "dst": "n03", "metric": "rtt_ms", "value": None},
    ]
    as_object = rows_of(json.dumps(samples[0]).encode())
    as_array = rows_of(json.dumps(samples).encode())
    as_arrow = rows_of(
        encode_arrow(
            [s["ts"] for s in samples], [s["src"] for s in samples], [s["dst"] for s in samples],
            [s["metric"] for s in samples], [np.nan if s["value"] is None else s["value"] for s in samples],
        )
    )
    assert as_object == samples[:1]
    assert as_array == samples
    assert as_arrow == samples


def test_arrow_plain_string_columns_and_missing_dst():
    table = pa.table({
        "ts": pa.array([NOW, NOW + 1]),
        "src": pa.array(["a", "b"]),
        "metric": pa.array(["rtt_ms", "rtt_ms"]),
        "value": pa.array([1.0, None], type=pa.float64()),
    })
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    batch = decode_samples(sink.getvalue().to_pybytes())
    assert batch.rows() == [
        {"ts": NOW, "src": "a", "dst": "", "metric": "rtt_ms", "value": 1.0},
        {"ts": NOW + 1, "src": "b", "dst": "", "metric": "rtt_ms", "value": None},
    ]
    assert batch.src.dtype == np.int32 and batch.ts.dtype == np.float64


@pytest.mark.parametrize("payload", [b"", b"\x00\x01garbage", b"{not json", b'"a string"', b"42"])
def test_undecodable_messages_raise_decode_error(payload):
    with pytest.raises(DecodeError):
        decode_samples(payload)


def test_validation_keeps_good_rows_and_says_why_for_each_bad_row():
    samples = [
        {"ts": NOW, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": 0.4},  # ok
        {"ts": NOW, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": -1},  # negative rtt
        {"ts": NOW, "src": "n01", "dst": "", "metric": "loss_rate", "value": 1.5},  # fraction > 1
        {"ts": NOW, "src": "", "dst": "", "metric": "bw_util", "value": 0.5},  # empty src
        {"ts": NOW + 10 * 86400, "src": "n01", "dst": "", "metric": "bw_util", "value": 0.5},  # skew
        {"ts": NOW, "src": "n01", "metric": "rtt_ms"},  # missing value
        {"ts": NOW, "src": "n01", "dst": "n02", "metric": "rtt_ms", "value": None},  # lost: ok
        {"ts": NOW, "src": "n01", "dst": "", "metric": "bw_util", "value": None},  # null non-rtt
        {"ts": NOW, "src": "n01", "dst": "", "metric": "gpu_temp_c", "value": 61.0},  # generic: ok
        {"ts": "yesterday", "src": "n01", "dst": "", "metric": "x", "value": 1},  # bad type
    ]
    check = validate_batch(decode_samples(json.dumps(samples).encode()), NOW, 86400)
    assert [r["value"] for r in check.good.rows()] == [0.4, None, 61.0]
    assert check.rejected == {REASON_OUT_OF_RANGE: 4, REASON_SCHEMA: 3}
    by_row = {e.row: e for e in check.listed}
    assert sorted(by_row) == [1, 2, 3, 4, 5, 7, 9]
    assert "rtt_ms must be >= 0" in by_row[1].detail
    assert "loss_rate must be in [0, 1]" in by_row[2].detail
    assert by_row[3].reason == REASON_SCHEMA and "src" in by_row[3].detail
    assert "clock skew" in by_row[4].detail
    assert "missing field(s): value" in by_row[5].detail
    assert "only rtt_ms may be null" in by_row[7].detail
    assert "ts must be a number" in by_row[9].detail


def test_arrow_rows_with_null_ts_are_rejected_in_place():
    table = pa.table({
        "ts": pa.array([NOW, None, NOW]), "src": pa.array(["a", "a", "a"]),
        "dst": pa.array(["", "", ""]), "metric": pa.array(["bw_util"] * 3),
        "value": pa.array([0.1, 0.2, 0.3]),
    })
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    check = validate_batch(decode_samples(sink.getvalue().to_pybytes()), NOW, 60)
    assert [r["value"] for r in check.good.rows()] == [0.1, 0.3]
    assert [(e.row, e.reason) for e in check.listed] == [(1, REASON_SCHEMA)]


def test_counts_are_exact_even_when_the_listing_is_capped():
    n = 1000
    payload = encode_arrow(np.full(n, NOW), ["a"] * n, [""] * n, ["bw_util"] * n, np.full(n, 2.0))
    check = validate_batch(decode_samples(payload), NOW, 60)
    assert check.rejected == {REASON_OUT_OF_RANGE: n}
    assert len(check.listed) == 100 and len(check.good) == 0
    assert math.isclose(check.good.ts.sum(), 0.0)
