"""Many Avro records of one flat schema decoded at once into numpy columns.

verify reads whole output topics (millions of raw records): decoding them one at a time, with
fastavro or the connector's hand-written reader, costs more than everything else verify does.
Here every field is decoded for all records of a block together, field by field, from the
schemas of the wire contract (streamkit/wire/schemas) and its registry framing
(streamkit.wire.registry): strings, longs, doubles and ``[null, long|double]`` unions, the only
types our schemas use. A trailing optional field that a record does not hold reads as null, a
trailing string with a default as its default: an older writer's record, as Avro's schema
resolution reads it (the aggregate's ``closed_at_ms``, the joined pair's ``component``).
Text becomes categoricals: each distinct string is decoded once. Strict: a record that does not
end exactly where its last field does, or holds text that is not UTF-8, is refused; the unit
tests decode the same bytes with the wire contract's reader and compare.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from streamkit.wire.avro import flat_fields
from streamkit.wire.registry import HEADER_SIZE, MAGIC

#: Room after the last record so that reading a malformed one never indexes past the buffer.
_PAD = 16
_HASH_MULTIPLIER = np.uint64(0x100000001B3)


class Undecodable(ValueError):
    """Records that are not the schema's Avro (or lack the registry header expected)."""

    def __init__(self, schema: str, count: int, first: int, why: str) -> None:
        super().__init__(
            f"{count:,} record(s) are not Avro {schema} ({why}; the first is record {first} of "
            "its block)"
        )
        self.count = count


class _Block:
    """One block's bytes, one padded buffer; ``pos`` the reading position of every record."""

    def __init__(self, schema: str, values: list[bytes], framed: bool) -> None:
        self.schema = schema
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        self.end = np.cumsum(lengths)
        self.pos = self.end - lengths
        self.buf = np.frombuffer(b"".join(values) + bytes(_PAD), dtype=np.uint8)
        self.limit = len(self.buf) - 1
        if framed:
            bad = (lengths < HEADER_SIZE) | (self.buf[self.pos] != MAGIC)
            self.refuse(bad, "no schema registry header (magic byte 0, schema id)")
            self.pos = self.pos + HEADER_SIZE

    def refuse(self, bad: np.ndarray, why: str) -> None:
        if bad.any():
            raise Undecodable(self.schema, int(bad.sum()), int(np.argmax(bad)), why)

    def byte(self, at: np.ndarray) -> np.ndarray:
        return self.buf[np.minimum(at, self.limit)]

    def varint(self, rows: np.ndarray) -> np.ndarray:
        """The zigzag varints at the rows' positions (advanced past them)."""
        pos = self.pos[rows]
        number = np.zeros(len(rows), dtype=np.uint64)
        active = np.arange(len(rows))
        shift = 0
        while len(active):
            if shift >= 70:
                self.refuse(np.ones(1, bool), "a varint longer than a long")
            byte = self.byte(pos[active])
            number[active] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
            pos[active] += 1
            active = active[(byte & 0x80) != 0]
            shift += 7
        self.pos[rows] = pos
        self.refuse(pos > self.end[rows], "a field runs past the record's end")
        return (number >> np.uint64(1)).astype(np.int64) ^ -(number & np.uint64(1)).astype(np.int64)

    def double(self, rows: np.ndarray) -> np.ndarray:
        pos = self.pos[rows]
        raw = np.empty((len(rows), 8), dtype=np.uint8)
        for j in range(8):
            raw[:, j] = self.byte(pos + j)
        self.pos[rows] = pos + 8
        self.refuse(self.pos[rows] > self.end[rows], "a field runs past the record's end")
        return raw.view("<f8").reshape(-1)

    def string(self, rows: np.ndarray, text: bool) -> pd.Categorical | None:
        length = self.varint(rows)
        self.refuse(length < 0, "a negative string length")
        start = self.pos[rows]
        self.pos[rows] = start + length
        self.refuse(self.pos[rows] > self.end[rows], "a string runs past the record's end")
        return _categorical(self, start, length) if text else None


def _string_or_default(block: _Block, default: str, text: bool) -> pd.Categorical | None:
    """A trailing string with a default: read where the record holds it, else the default."""
    present = np.flatnonzero(block.pos < block.end)
    found = block.string(present, text)
    if not text:
        return None
    assert found is not None
    if len(present) == len(block.pos):
        return found
    values = np.full(len(block.pos), default, dtype=object)
    values[present] = np.asarray(found, dtype=object)
    return pd.Categorical(values)


def _bytes_at(block: _Block, start: np.ndarray, length: np.ndarray, j: int) -> np.ndarray:
    """Byte j of each string, 0 past its end."""
    return np.where(j < length, block.byte(start + j), 0).astype(np.uint64)


def _categorical(block: _Block, start: np.ndarray, length: np.ndarray) -> pd.Categorical:
    """Strings as a categorical: hashed column-wise, each distinct hash decoded once, and every
    string checked byte by byte against its group's first (a collision cannot merge two)."""
    if not len(start):
        return pd.Categorical([])
    digest = length.astype(np.uint64)
    longest = int(length.max())
    for j in range(longest):
        digest = digest * _HASH_MULTIPLIER + _bytes_at(block, start, length, j)
    _, first, codes = np.unique(digest, return_index=True, return_inverse=True)
    codes = codes.reshape(-1)
    same = length == length[first][codes]
    for j in range(longest):
        same &= _bytes_at(block, start, length, j) == _bytes_at(
            block, start[first][codes], length[first][codes], j
        )
    if not same.all():  # a 64-bit collision: never seen, but then decode them one by one
        texts = [block.buf[s : s + n].tobytes() for s, n in zip(start, length, strict=True)]
        return pd.Categorical([_utf8(block, t) for t in texts])
    names = [_utf8(block, block.buf[start[i] : start[i] + length[i]].tobytes()) for i in first]
    if len(set(names)) != len(names):  # cannot be: distinct bytes decode to distinct text
        raise AssertionError("two byte strings decoded to one text")
    order = np.argsort(names)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], categories=[names[i] for i in order])


def _utf8(block: _Block, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        block.refuse(np.ones(1, bool), "a string that is not UTF-8")
        raise AssertionError("unreachable") from None


def decode_columns(
    schema: str, values: list[bytes], *, framed: bool = False, text: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Every field of ``values`` (Avro ``schema``, with the registry header when ``framed``):
    longs as int64, doubles as float64, optional ones as float64 with NaN for null, the string
    fields named in ``text`` as categoricals (the other strings are checked, not kept)."""
    block = _Block(schema, values, framed)
    everyone = np.arange(len(values))
    out: dict[str, Any] = {}
    for field in flat_fields(schema):
        rows = everyone
        column: np.ndarray | None = None
        if field.optional:
            present_bytes = block.pos < block.end  # an older writer's record ends before it
            branch = np.full(len(values), -1, dtype=np.int64)
            branch[present_bytes] = block.varint(everyone[present_bytes])
            block.refuse(present_bytes & (branch != 0) & (branch != 1), "a bad union branch")
            rows = everyone[branch == 1]
            column = np.full(len(values), np.nan)
        if field.kind == "string" and field.default is not None:
            out[field.name] = _string_or_default(block, field.default, field.name in text)
            continue
        if field.kind == "string":
            out[field.name] = block.string(rows, field.name in text)
            continue
        found = block.varint(rows) if field.kind == "long" else block.double(rows)
        if column is None:
            out[field.name] = found
        else:
            column[rows] = found
            out[field.name] = column
    block.refuse(block.pos != block.end, "bytes left after the last field")
    return out
