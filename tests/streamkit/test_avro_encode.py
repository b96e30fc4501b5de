"""The column encoder writes exactly what the wire contract's one-record writer writes."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.wire import AvroCodec
from streamkit.wire.avro_encode import ColumnEncoder

text = st.text(max_size=12)
long = st.integers(-(2**63), 2**63 - 1)
double = st.floats(allow_nan=True, allow_infinity=True)
#: a nullable long travels as float64 (NaN: null): exact up to 2**53, as millisecond times are
exact = st.integers(-(2**53), 2**53)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(text, text, long, double, text, text, text, st.one_of(st.none(), exact)),
        max_size=20,
    ),
    st.sampled_from([b"", b"\x00\x00\x00\x00\x07"]),
)
def test_late_records_encode_as_the_one_record_writer_does(
    rows: list[tuple], prefix: bytes
) -> None:
    names = ["thing", "quantity", "event_time_ms", "value", "row_id", "reason", "stage"]
    columns: dict = {
        name: np.array([r[i] for r in rows], dtype=object if i in (0, 1, 4, 5, 6) else None)
        for i, name in enumerate(names)
    }
    columns["event_time_ms"] = np.array([r[2] for r in rows], dtype=np.int64)
    columns["value"] = np.array([r[3] for r in rows], dtype=np.float64)
    columns["watermark_ms"] = np.array(
        [math.nan if r[7] is None else r[7] for r in rows], dtype=np.float64
    )
    got = ColumnEncoder("late").encode(columns, len(rows), prefix)
    codec = AvroCodec("late")
    want: list[bytes] = []
    for r in rows:
        record = dict(zip(names, r[:7], strict=True))
        mark = columns["watermark_ms"][len(want)]
        record["watermark_ms"] = None if math.isnan(mark) else int(mark)
        want.append(prefix + codec.encode(record))
    assert got == want
