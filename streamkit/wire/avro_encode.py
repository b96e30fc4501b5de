"""Many Avro records of one flat schema encoded at once from columns.

The Spark single pass with its state in the driver renders a batch's outputs as columns
(joined pairs, windows, late records) and produces them itself; encoding them one dict at a time
would cost more than computing them. :class:`ColumnEncoder` takes a batch's columns and returns
each row's Avro bytes, byte-identical to the wire contract's writer (:class:`AvroCodec`; tested),
optionally opened by the schema registry's header. The schemas' types are strings, longs,
doubles and ``[null, long|double]`` unions; a union's null is a NaN in its float64 column, as
the jobs' output rows mark it.

The work is column-wise, so that no Python code runs per row: each field's encoded length per
row (zigzag varint sizes, UTF-8 lengths through Arrow, 8 for a double, a union's branch byte), the
rows' offsets by a cumulative sum, then the fields side by side in one matrix padded to each
field's longest value (a varint as its bytes masked by its size, text padded once per distinct
string), the real bytes kept in row order by the mask, and Arrow cutting the rows into ``bytes``
(a producer takes nothing cheaper: confluent-kafka refuses memoryviews). A column given as one
value is encoded once. A batch where a few long strings would make the padding cost more than
the data is scattered instead, each field at its rows' offsets by index arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from streamkit.wire.avro import (
    FlatField,
    avro_double,
    avro_long,
    avro_string,
    flat_fields,
    schema_text,
)

#: A row's length or a field's length in every row: one int when it is the same for all.
Lengths = int | np.ndarray

_EIGHT = np.arange(8, dtype=np.int64)
_NONE = np.zeros(0, dtype=np.uint8)
#: Padding the matrix may add per row, beyond twice the mean row, before scattering is cheaper.
_SLACK = 64
_SEVEN_BITS = np.uint64(0x7F)
#: Rows per padded matrix: some hundred kilobytes, which stay in the CPU's cache while filled.
_CHUNK = 4096
#: 2**(7k) for k = 1..9: a zigzag varint takes one byte more at each of them.
_VARINT_STEPS = [np.uint64(1 << (7 * k)) for k in range(1, 10)]


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and np.isnan(value))


def _constant(field: FlatField, value: Any) -> bytes:
    """One value's Avro bytes, converted as the one-record writer's caller would."""
    if field.optional:
        if _is_null(value):
            return b"\x00"
        return b"\x02" + (avro_long(int(value)) if field.kind == "long" else avro_double(value))
    if field.kind == "string":
        return avro_string(str(value))
    return avro_long(int(value)) if field.kind == "long" else avro_double(float(value))


class _Piece:
    """One field's encoded form for every row: its length per row, and two ways to write it.

    ``fill`` writes it into its columns of a rows x widths matrix, padded to the longest row
    (``mask``: which bytes are real; None when every row has ``width`` of them); ``write``
    scatters it into the packed buffer at each row's position, for batches whose padding would
    cost more than the scatter (a few very long strings)."""

    length: Lengths
    width: int

    def fill(self, out: np.ndarray, rows: slice) -> None:
        raise NotImplementedError

    def mask(self, rows: slice) -> np.ndarray | None:
        return None

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:
        raise NotImplementedError


def _below(length: np.ndarray, width: int) -> np.ndarray:
    return np.arange(width) < length[:, None]


class _Constant(_Piece):
    """The same bytes in every row (a constant column, the registry header)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = np.frombuffer(raw, dtype=np.uint8)
        self.length = self.width = len(raw)

    def fill(self, out: np.ndarray, rows: slice) -> None:
        out[:] = self.raw

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:
        if self.width:
            buf[pos[:, None] + np.arange(self.width)] = self.raw


class _Varint(_Piece):
    """Zigzag varints (Avro int/long); a row of size 0 is skipped (a union's null)."""

    def __init__(self, values: np.ndarray, present: np.ndarray | None = None) -> None:
        signed = values.astype(np.int64, copy=False)
        self.zigzag = (signed.view(np.uint64) << np.uint64(1)) ^ (signed >> 63).view(np.uint64)
        size = np.ones(len(signed), dtype=np.int64)
        largest = self.zigzag.max()
        for step in _VARINT_STEPS:
            if largest < step:
                break
            size += self.zigzag >= step
        if present is not None:
            size[~present] = 0
        self.length = self.size = size
        self.width = int(size.max())
        self.uniform = int(size.min()) == self.width

    def _bytes(self, rows: slice = slice(None)) -> Iterator[np.ndarray]:
        """Byte k of every row's varint, for k up to the longest (garbage past a row's own)."""
        size = self.size[rows]
        rest = self.zigzag[rows]
        for k in range(self.width):
            if k:
                rest = rest >> np.uint64(7)
            byte = (rest & _SEVEN_BITS).astype(np.uint8)
            if self.uniform:
                yield byte | 0x80 if k + 1 < self.width else byte
            else:
                yield byte | ((size > k + 1) << 7).astype(np.uint8)

    def fill(self, out: np.ndarray, rows: slice) -> None:
        for k, byte in enumerate(self._bytes(rows)):
            out[:, k] = byte

    def mask(self, rows: slice) -> np.ndarray | None:
        return None if self.uniform else _below(self.size[rows], self.width)

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:
        size = self.size
        for k, byte in enumerate(self._bytes()):
            if self.uniform:
                buf[pos + k] = byte
            else:
                rows = size > k
                buf[pos[rows] + k] = byte[rows]


class _Double(_Piece):
    """Little-endian IEEE doubles, bits as they are (NaN payloads included)."""

    def __init__(self, values: np.ndarray, present: np.ndarray | None = None) -> None:
        self.raw = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(-1, 8)
        self.present = present
        self.length = 8 if present is None else np.where(present, 8, 0)
        self.width = 8

    def fill(self, out: np.ndarray, rows: slice) -> None:
        out[:] = self.raw[rows]

    def mask(self, rows: slice) -> np.ndarray | None:
        if self.present is None:
            return None
        return self.present[rows, None]

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:
        if self.present is None:
            buf[pos[:, None] + _EIGHT] = self.raw
        else:
            buf[pos[self.present][:, None] + _EIGHT] = self.raw[self.present]


class _Text(_Piece):
    """Strings' UTF-8 bytes (their length varints are a piece of their own), from Arrow's
    offsets and data. Strings of one length are the data reshaped; others are padded once per
    distinct string (a batch's Things and quantities repeat) and taken by each row's code."""

    def __init__(self, values: np.ndarray) -> None:
        array = pa.array(values, type=pa.large_string())
        if array.null_count:
            raise TypeError("a string field holds a null")
        self.start, self.length, self.data = _utf8(array)
        self.width = int(self.length.max())
        self.uniform = int(self.length.min()) == self.width
        if not self.uniform:
            coded = array.dictionary_encode()
            self.codes = coded.indices.to_numpy()
            start, length, data = _utf8(coded.dictionary)
            at = np.minimum(start[:, None] + np.arange(self.width), len(data) - 1)
            self.padded, self.real = data[at], _below(length, self.width)

    def fill(self, out: np.ndarray, rows: slice) -> None:
        if self.uniform:
            if self.width:
                out[:] = self.data.reshape(-1, self.width)[rows]
        else:
            np.take(self.padded, self.codes[rows], axis=0, out=out)

    def mask(self, rows: slice) -> np.ndarray | None:
        return None if self.uniform else self.real[self.codes[rows]]

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:
        if len(self.data):
            shift = np.repeat(pos - self.start, self.length)
            buf[shift + np.arange(len(self.data))] = self.data


def _utf8(array: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, length, data) of an Arrow string array: each string's bytes in ``data``."""
    _, offsets, data = array.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    raw = np.frombuffer(data, dtype=np.uint8)[bounds[0] : bounds[-1]] if data else _NONE
    return bounds[:-1] - bounds[0], np.diff(bounds), raw


class ColumnEncoder:
    """Encoder of one schema (``streamkit/wire/schemas/<name>.avsc``) over columns."""

    def __init__(self, schema_name: str) -> None:
        self.schema_name = schema_name
        self._fields = flat_fields(schema_name)
        self.fields: list[tuple[str, Any]] = [
            (f["name"], f["type"]) for f in json.loads(schema_text(schema_name))["fields"]
        ]

    def encode(self, columns: Mapping[str, Any], rows: int, prefix: bytes = b"") -> list[bytes]:
        """Each row's value: ``prefix`` then the Avro record of the row's fields. A column is a
        numpy array (object for strings, int64 for longs, float64 for doubles and unions, whose
        NaN is null; int64 for a union without a null) or one value for every row."""
        if rows == 0:
            return []
        pieces: list[_Piece] = [_Constant(prefix)] if prefix else []
        for field in self._fields:
            for piece in self._pieces(field, columns[field.name], rows):
                if isinstance(piece, _Constant) and pieces and isinstance(pieces[-1], _Constant):
                    pieces[-1] = _Constant(pieces[-1].raw.tobytes() + piece.raw.tobytes())
                else:
                    pieces.append(piece)
        row_length: Lengths = 0
        for piece in pieces:
            row_length = row_length + piece.length
        ends = np.cumsum(np.broadcast_to(np.asarray(row_length, dtype=np.int64), (rows,)))
        width = sum(piece.width for piece in pieces)
        if width <= 2 * int(ends[-1]) // rows + _SLACK:
            buf = _packed_matrix(pieces, ends, width)
        else:
            buf = _scattered(pieces, ends, row_length)
        offsets = np.empty(rows + 1, dtype=np.int64)
        offsets[0] = 0
        offsets[1:] = ends
        # Arrow slices the buffer into bytes objects in C, faster than a Python loop over it.
        block = pa.Array.from_buffers(
            pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(buf)]
        )
        return block.to_pylist()

    @staticmethod
    def _pieces(field: FlatField, column: Any, rows: int) -> list[_Piece]:
        if not isinstance(column, np.ndarray):
            return [_Constant(_constant(field, column))]
        if len(column) != rows:
            raise ValueError(f"column {field.name} has {len(column)} values for {rows} rows")
        if field.kind == "string":
            text = _Text(column)
            return [_Varint(np.asarray(text.length)), text]
        if field.optional:
            if column.dtype.kind in "iu":  # no null: the longs as they are, beyond 2**53 too
                present = np.ones(rows, dtype=bool)
                values = column
            else:
                values = column.astype(np.float64)
                present = ~np.isnan(values)
                if field.kind == "long":
                    values = np.where(present, values, 0)
            branch = _Varint(present.astype(np.int64))  # 0: null, 1: the value
            if field.kind == "long":
                return [branch, _Varint(values.astype(np.int64, copy=False), present)]
            return [branch, _Double(values.astype(np.float64, copy=False), present)]
        if field.kind == "long":
            return [_Varint(column.astype(np.int64, copy=False))]
        return [_Double(column.astype(np.float64, copy=False))]


def _packed_matrix(pieces: list[_Piece], ends: np.ndarray, width: int) -> np.ndarray:
    """Every piece in its columns of a padded matrix, then the real bytes in row order; some
    thousand rows at a time, so that the matrix stays in the CPU's cache while it is filled."""
    rows = len(ends)
    buf = np.empty(int(ends[-1]), dtype=np.uint8)
    for first in range(0, rows, _CHUNK):
        part = slice(first, min(first + _CHUNK, rows))
        matrix = np.empty((part.stop - first, width), dtype=np.uint8)
        keep: np.ndarray | None = None
        column = 0
        for piece in pieces:
            columns = slice(column, column + piece.width)
            piece.fill(matrix[:, columns], part)
            mask = piece.mask(part)
            if mask is not None:
                if keep is None:
                    keep = np.ones(matrix.shape, dtype=bool)
                keep[:, columns] = mask
            column += piece.width
        begin = int(ends[first - 1]) if first else 0
        buf[begin : int(ends[part.stop - 1])] = matrix.reshape(-1) if keep is None else matrix[keep]
    return buf


def _scattered(pieces: list[_Piece], ends: np.ndarray, row_length: Lengths) -> np.ndarray:
    """Every piece scattered at its rows' positions in the packed buffer."""
    buf = np.empty(int(ends[-1]), dtype=np.uint8)
    pos = ends - row_length
    for piece in pieces:
        piece.write(buf, pos)
        pos = pos + piece.length
    return buf
