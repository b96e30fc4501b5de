"""The column encoder writes exactly what the wire contract's one-record writer writes, for every
schema the single pass produces (and measurement), whatever mix of array and constant columns,
nulls, extreme longs, NaN and infinite doubles, non-ASCII text, prefix and batch size."""

from __future__ import annotations

import json
import math
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.wire import AvroCodec, avro_encode, schema_text
from streamkit.wire.avro_encode import ColumnEncoder

SCHEMAS = ["joined", "aggregate", "late", "measurement"]
PREFIXES = [b"", b"\x00\x00\x00\x00\x07"]

text = st.text(max_size=12)
long = st.integers(-(2**63), 2**63 - 1)
double = st.floats(allow_nan=True, allow_infinity=True)
#: a nullable long travels as float64 (NaN: null): exact up to 2**53, as millisecond times are
exact = st.integers(-(2**53), 2**53)


def kinds(schema: str) -> list[tuple[str, str]]:
    """(field, kind) with kind one of string, long, double, long?, double? (a null union)."""
    out = []
    for spec in json.loads(schema_text(schema))["fields"]:
        kind = spec["type"]
        out.append((spec["name"], f"{kind[1]}?" if isinstance(kind, list) else kind))
    return out


def value_of(kind: str, texts: st.SearchStrategy[str] = text) -> st.SearchStrategy[Any]:
    return {
        "string": texts,
        "long": long,
        "double": double,
        "long?": st.one_of(st.none(), exact),
        "double?": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=True)),
    }[kind]


def array_of(kind: str, values: list[Any]) -> np.ndarray:
    if kind == "string":
        return np.array(values, dtype=object).reshape(len(values))
    if kind == "long":
        return np.array(values, dtype=np.int64).reshape(len(values))
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def expected(schema: str, table: dict[str, Any], rows: int, prefix: bytes) -> list[bytes]:
    """The one-record writer's bytes, from the values as Python objects (None for null)."""
    codec = AvroCodec(schema)
    records: list[dict[str, Any]] = [{} for _ in range(rows)]
    for name, _ in kinds(schema):
        column = table[name]
        values = column if isinstance(column, list) else [column] * rows
        for record, value in zip(records, values, strict=True):
            record[name] = value
    return [prefix + codec.encode(record) for record in records]


@st.composite
def batches(draw: st.DrawFn, schema: str, texts: st.SearchStrategy[str] = text) -> tuple:
    """(columns for the encoder, the same values as Python objects, rows, prefix)."""
    rows = draw(st.integers(0, 12))
    columns: dict[str, Any] = {}
    table: dict[str, Any] = {}
    for name, kind in kinds(schema):
        if draw(st.integers(0, 3)) == 0:  # one value for every row
            value = draw(value_of(kind, texts))
            table[name] = value
            columns[name] = math.nan if value is None and draw(st.booleans()) else value
        else:
            values = draw(st.lists(value_of(kind, texts), min_size=rows, max_size=rows))
            table[name] = values
            columns[name] = array_of(kind, values)
    return columns, table, rows, draw(st.sampled_from(PREFIXES))


@pytest.mark.parametrize("slack", [10**9, -(10**9)], ids=["matrix", "scatter"])
@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_schema_encodes_as_the_one_record_writer_does(
    schema: str, slack: int, data: Any
) -> None:
    """Both ways of laying the bytes out (the padded matrix, the scatter), each forced; the
    matrix a few rows at a time, so that batches span several."""
    columns, table, rows, prefix = data.draw(batches(schema))
    with patch.object(avro_encode, "_SLACK", slack), patch.object(avro_encode, "_CHUNK", 5):
        got = ColumnEncoder(schema).encode(columns, rows, prefix)
    assert got == expected(schema, table, rows, prefix)


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_long_strings_among_short_ones_encode_the_same(data: Any) -> None:
    """A few long strings make the padded matrix wasteful: the scatter path, same bytes."""
    texts = st.one_of(text, text, text, st.text(min_size=200, max_size=300))
    columns, table, rows, prefix = data.draw(batches("late", texts))
    got = ColumnEncoder("late").encode(columns, rows, prefix)
    assert got == expected("late", table, rows, prefix)


@pytest.mark.parametrize("wide", [False, True])
def test_a_batch_with_every_extreme_at_once(wide: bool) -> None:
    """Both paths (padded matrix, scatter) over the varint sizes' edges, NaN, infinities,
    multi-byte UTF-8 and a union's null and present values in one batch."""
    edges = [0, -1, 1, 63, -64, 64, -65, 2**63 - 1, -(2**63)]
    edges += [s * 2**k + d for k in range(6, 63, 7) for s in (1, -1) for d in (-1, 0)]
    rows = len(edges)
    names = ["Fräse-7", "機械", "", "R0815", "😀" * 3, "x" * (500 if wide else 20)]
    doubles = [math.nan, -math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.5]
    table: dict[str, Any] = {
        "thing": [names[i % len(names)] for i in range(rows)],
        "quantity": "Drehmoment_µ",
        "event_time_ms": edges,
        "value": [doubles[i % len(doubles)] for i in range(rows)],
        "row_id": [str(i) * (i % 4) for i in range(rows)],
        "reason": "behind_watermark",
        "stage": "join",
        "watermark_ms": [None if i % 3 == 0 else (i - 20) * 2**40 for i in range(rows)],
    }
    columns = {
        name: array_of(kind, table[name]) if isinstance(table[name], list) else table[name]
        for name, kind in kinds("late")
    }
    got = ColumnEncoder("late").encode(columns, rows, b"\x00\x00\x00\x00\x2a")
    assert got == expected("late", table, rows, b"\x00\x00\x00\x00\x2a")


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_empty_batch_is_no_records(schema: str) -> None:
    columns: dict[str, Any] = {
        name: "x" if kind == "string" else 0 if kind == "long" else math.nan
        for name, kind in kinds(schema)
    }
    assert ColumnEncoder(schema).encode(columns, 0, b"\x00") == []
    arrays = {name: array_of(kind, []) for name, kind in kinds(schema)}
    assert ColumnEncoder(schema).encode(arrays, 0) == []


def test_a_column_of_the_wrong_length_is_refused() -> None:
    columns: dict[str, Any] = {name: 1.0 for name, _ in kinds("aggregate")}
    columns.update(thing="T", quantity="q", window_kind="tumbling", count=np.arange(3))
    for name in ("window_size_ms", "window_slide_ms", "window_start_ms", "window_end_ms"):
        columns[name] = 10
    with pytest.raises(ValueError, match="count"):
        ColumnEncoder("aggregate").encode(columns, 2)


def test_each_varint_size_edge_alone() -> None:
    """A column whose largest value sits exactly on a size edge (its own batch)."""
    codec = AvroCodec("measurement")
    for bits in range(1, 64):
        for number in (2 ** (bits - 1) - 1, 2 ** (bits - 1), -(2 ** (bits - 1)), -(2**bits) + 1):
            number = max(min(number, 2**63 - 1), -(2**63))
            columns = {
                "thing": np.array(["T"], dtype=object),
                "quantity": "q",
                "event_time_ms": np.array([number], dtype=np.int64),
                "value": np.array([0.5]),
                "row_id": "r",
            }
            record = {"thing": "T", "quantity": "q", "event_time_ms": number}
            want = codec.encode(record | {"value": 0.5, "row_id": "r"})
            assert ColumnEncoder("measurement").encode(columns, 1) == [want], number


def test_a_union_of_longs_without_nulls_may_come_as_int64() -> None:
    """Exact beyond 2**53, where a float64 column could not carry the value."""
    marks = [2**63 - 1, -(2**63), 2**53 + 1, 0]
    table: dict[str, Any] = {
        "thing": "T",
        "quantity": "q",
        "event_time_ms": 1,
        "value": 0.5,
        "row_id": "r",
        "reason": "duplicate",
        "stage": "aggregate",
        "watermark_ms": marks,
    }
    columns = table | {"watermark_ms": np.array(marks, dtype=np.int64)}
    assert ColumnEncoder("late").encode(columns, 4) == expected("late", table, 4, b"")
