"""Avro in both directions, shared by the bridge (writer), the Spark jobs (spark-avro reads the
same .avsc), the connector (reader) and the tests. Plain Avro binary, no registry header: that
is what ``from_avro`` expects. The hand-written encoder and reader of ``measurement`` sit next
to each other so the two halves of the hot path cannot drift apart."""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

import fastavro

from streamkit.wire.resources import schema_file


@cache
def schema_text(name: str) -> str:
    """The .avsc as text: spark-avro takes the JSON string, fastavro the parsed form."""
    return schema_file(name).read_text()


#: schema -> its last field, added with a default after records were written without it: a
#: reader also reads those older records (schema resolution gives them the default)
ADDED_LAST = {"aggregate": "closed_at_ms", "joined": "component"}


@cache
def schema_before(name: str) -> str:
    """The schema as it was before its :data:`ADDED_LAST` field, as JSON text."""
    current = json.loads(schema_text(name))
    added = ADDED_LAST[name]
    return json.dumps({**current, "fields": [f for f in current["fields"] if f["name"] != added]})


@cache
def parsed_schema(name: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_text(name)))


@dataclass(frozen=True)
class FlatField:
    """A field of one of the wire contract's flat schemas."""

    name: str
    kind: str  # string | long | double
    optional: bool  # ["null", kind]: a long or a double that may be null
    #: a string added to the schema with this default: an older writer's record ends before it
    default: str | None = None


def flat_fields(schema: str) -> list[FlatField]:
    """The fields of ``schema``: strings, longs, doubles and ``[null, long|double]`` unions,
    the only types the wire contract's schemas use. The column-wise encoder and decoder handle
    exactly these; a schema with another type is refused here, before either reads a byte."""
    out = []
    for spec in json.loads(schema_text(schema))["fields"]:
        kind = spec["type"]
        optional = isinstance(kind, list)
        if optional:
            if len(kind) != 2 or kind[0] != "null" or kind[1] not in ("long", "double"):
                raise ValueError(f"{schema}.avsc: {spec['name']} is not [null, long|double]")
            kind = kind[1]
        elif kind not in ("string", "long", "double"):
            raise ValueError(f"{schema}.avsc: {spec['name']} has the unsupported type {kind}")
        default = spec.get("default") if kind == "string" else None
        out.append(FlatField(spec["name"], kind, optional, default))
    return out


class AvroCodec:
    """Encoder/decoder for one schema; reuses one buffer because encoding sits on hot paths."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._schema = parsed_schema(name)
        self._buffer = io.BytesIO()

    def encode(self, record: dict[str, Any]) -> bytes:
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        fastavro.schemaless_writer(buffer, self._schema, record)
        return buffer.getvalue()

    def decode(self, payload: bytes) -> dict[str, Any]:
        return read_record(payload, self._schema)


def read_record(payload: bytes, writer_schema: Any, reader_schema: Any = None) -> dict[str, Any]:
    """One record's fields, read with ``writer_schema`` (resolved to ``reader_schema`` when
    given). fastavro types the result as any Avro value; every schema here is a record, so
    anything else means a schema that is not one of ours."""
    record = fastavro.schemaless_reader(io.BytesIO(payload), writer_schema, reader_schema)
    if not isinstance(record, dict):
        raise TypeError(f"not an Avro record schema: it read a {type(record).__name__}")
    return record


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def avro_long(number: int) -> bytes:
    """An Avro int/long: zigzag varint. One byte from a table when it fits (the length of every
    short string: the bridge encodes two per row)."""
    number = (number << 1) ^ (number >> 63)
    if 0 <= number < 0x80:
        return _ONE_BYTE[number]
    out = bytearray()
    while number & ~0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def avro_string(text: str) -> bytes:
    """An Avro string: length, then UTF-8."""
    raw = text.encode("utf-8")
    return avro_long(len(raw)) + raw


avro_double = struct.Struct("<d").pack
_read_double = struct.Struct("<d").unpack_from


#: Quantity names whose Avro bytes the encoder keeps ready: far more than a fleet sends, and a
#: machine sending a new name in every message costs memory only up to it.
QUANTITY_CACHE = 10_000


class MeasurementEncoder:
    """Hand-rolled encoder for ``measurement.avsc``, faster than fastavro's schemaless
    writer because the bridge encodes several records per MQTT message and the per-row parts
    (thing, row id) are encoded once per row (the bridge's cost: docs/performance.md), and
    quantity names once, up to :data:`QUANTITY_CACHE` of them. Byte-identical to fastavro
    (tested)."""

    def __init__(self) -> None:
        fields = [f["name"] for f in json.loads(schema_text("measurement"))["fields"]]
        if fields != ["thing", "quantity", "event_time_ms", "value", "row_id"]:
            raise RuntimeError(f"measurement.avsc changed ({fields}): update MeasurementEncoder")
        self._quantity_cache: dict[str, bytes] = {}

    def encode_row(
        self, thing: str, row_id: str, event_time_ms: int, quantities: dict[str, float]
    ) -> list[tuple[str, bytes]]:
        """(quantity, Avro bytes) for every quantity of one row."""
        thing_bytes = avro_string(thing)
        tail = avro_string(row_id)
        time_bytes = avro_long(event_time_ms)
        cache = self._quantity_cache
        out = []
        for quantity, value in quantities.items():
            quantity_bytes = cache.get(quantity)
            if quantity_bytes is None:
                if len(cache) >= QUANTITY_CACHE:  # a flood of new names: memory stays bounded
                    cache.clear()
                quantity_bytes = cache[quantity] = avro_string(quantity)
            out.append(
                (
                    quantity,
                    b"".join((thing_bytes, quantity_bytes, time_bytes, avro_double(value), tail)),
                )
            )
        return out


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """One zigzag varint (Avro int/long) at ``pos``: (value, position after it). More than ten
    bytes cannot be a 64-bit long: refused (ValueError), as the Avro reference readers do."""
    byte = buf[pos]
    pos += 1
    number = byte & 0x7F
    shift = 7
    while byte & 0x80:
        if shift >= 70:
            raise ValueError("varint longer than a long")
        byte = buf[pos]
        pos += 1
        number |= (byte & 0x7F) << shift
        shift += 7
    if number >> 64:
        raise ValueError("varint beyond 64 bits")
    return (number >> 1) ^ -(number & 1), pos


def split_measurement(value: bytes) -> tuple[int, int, float]:
    """The reading half of :class:`MeasurementEncoder`, for the connector's hot path:
    (end of the (thing, quantity) prefix, event time ms, value) of a ``measurement`` datum.
    The prefix decides everything a reader caches per stream, so it is returned as a position
    and left undecoded. Strict like fastavro: the row id must be UTF-8 and end the bytes
    exactly; anything else raises IndexError, TypeError, ValueError or struct.error."""
    length, pos = read_long(value, 0)
    if length < 0:
        raise ValueError("negative length")
    length, pos = read_long(value, pos + length)
    if length < 0:
        raise ValueError("negative length")
    head_end = pos + length
    time_ms, pos = read_long(value, head_end)
    number = _read_double(value, pos)[0]
    length, pos = read_long(value, pos + 8)
    if length < 0 or pos + length != len(value):
        raise ValueError("row id does not end the record")
    value[pos : pos + length].decode()
    return head_end, time_ms, number
