"""Fuzz targets: every function that reads untrusted bytes, with the property it must keep.

Each target takes one input and raises (AssertionError or anything unexpected) only on a bug:
parsers may refuse an input with their own typed error, never with anything else, and where
two decoders read the same bytes they must agree. Run coverage-guided by ``python -m
tests.fuzz`` (atheris), and replayed over the corpus and every saved crash by
``tests/fuzz/test_fuzzers.py``.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from db_connector.lineprotocol import (
    NS_PER_MS,
    PointError,
    quantity_tag,
    string_field,
    tag_value,
    thing_tag,
)
from db_connector.points import KINDS, raw_converter
from mqtt_bridge.records import RowSplitter
from streamkit.durations import parse_duration_ms
from streamkit.events import Row, RowError, check_event_time, parse_row
from streamkit.events_file import EventsFileError
from streamkit.events_source import EventsCheck, SourceStats, check_events, read_rows
from streamkit.identifiers import MAX_CHARS, is_quantity, is_thing
from streamkit.wire import (
    AvroCodec,
    aggregate_key,
    machine_topic,
    parse_record_key,
    parsed_schema,
    record_key,
)


class FakeMessage:
    """What the connector's converters read of a Kafka message."""

    def __init__(self, value: bytes | None, headers: list[tuple[str, bytes]] | None = None) -> None:
        self._value, self._headers = value, headers

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers

    def topic(self) -> str:
        return "fuzz"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 7

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_554_000_000_000

    def key(self) -> bytes:
        return b"fuzz"


_SPLITTER = RowSplitter(4)
_MEASUREMENT = AvroCodec("measurement")


def rows(data: bytes) -> None:
    """The bridge's row parser (JSON and Python-dict style, every timestamp form): a Row or a
    RowError; a Row always becomes Avro records that decode back to it."""
    try:
        row = parse_row(data)
    except RowError:
        return
    try:
        check_event_time(row.timestamp_ms, 1_790_000_000_000, 3_600_000)
    except RowError:
        return
    names_hold(row)
    records = _SPLITTER.split(row)
    assert len(records) == len(row.quantities)
    for record in records:
        decoded = _MEASUREMENT.decode(record.value)
        assert decoded["thing"] == row.thing and decoded["event_time_ms"] == row.timestamp_ms
        assert decoded["value"] == row.quantities[decoded["quantity"]]


_RAW_FAST = raw_converter()


def strict_decode(codec: AvroCodec, data: bytes) -> dict:
    """fastavro's reading, refusing trailing bytes as the connector does (a record is exactly
    one datum)."""
    stream = io.BytesIO(data)
    record = fastavro.schemaless_reader(stream, parsed_schema(codec.name), None)
    if stream.tell() != len(data):
        raise ValueError("trailing bytes")
    assert isinstance(record, dict)  # the schemas are records
    return record


def raw_avro(data: bytes) -> None:
    """The connector's hand-written raw decoder against fastavro. Where fastavro refuses, the
    fast path refuses; where the fast path makes a line, fastavro read the same record. Only
    non-canonical bytes (over-long varints, which fastavro reads modulo 2**64) may be refused
    by the fast path alone."""
    try:
        message: Any = FakeMessage(data)  # for a consumed Message
        got: str | None = _RAW_FAST(message)
    except PointError:
        got = None
    try:
        r = strict_decode(_MEASUREMENT, data)
    except Exception:
        assert got is None, got
        return
    try:
        if not math.isfinite(r["value"]):
            raise PointError("non_finite_value", "")
        want: str | None = (
            f"raw,quantity={quantity_tag(r['quantity'])},thing={thing_tag(r['thing'])} "
            f"value={r['value']!r} {r['event_time_ms'] * NS_PER_MS}"
        )
    except PointError:
        want = None
    if got is not None or _MEASUREMENT.encode(r) == data:
        assert got == want, (got, want)


_CONVERTERS = {
    kind: KINDS[kind].converter()
    for kind in ("joined", "aggregates", "late", "dlq", "opstats", "overloads")
}


_MEASUREMENTS = {
    kind: {KINDS[kind].measurement, "opstats_band"}
    if kind == "opstats"
    else {KINDS[kind].measurement}
    for kind in _CONVERTERS
}


def output_avro(data: bytes) -> None:
    """The other record kinds the connector reads: lines or a PointError, nothing else (one
    line a point; a cycle of the statistics is several: its figures and its bands). The first
    byte picks the kind; dead letters get the rest as a header too."""
    if not data:
        return
    kinds = sorted(_CONVERTERS)
    kind, body = kinds[data[0] % len(kinds)], data[1:]
    headers = [("reason", body[:40]), ("payload_bytes", body[40:60]), ("detail", body[60:])]
    try:
        message: Any = FakeMessage(body, headers if kind == "dlq" else None)
        line = _CONVERTERS[kind](message)
    except PointError:
        return
    points = line.split("\n")
    assert all(points) and (len(points) == 1 or kind == "opstats"), line
    assert all(p.split(",", 1)[0] in _MEASUREMENTS[kind] for p in points), line


def line_protocol(data: bytes) -> None:
    """Escaping: a tag value is refused or escaped so that it cannot end the tag; a string
    field cannot end the line or the string."""
    text = data.decode("utf-8", "replace")
    try:
        escaped = tag_value(text)
    except PointError:
        escaped = None
    if escaped is not None:
        unescaped = escaped.replace("\\,", "").replace("\\=", "").replace("\\ ", "")
        assert not any(c in unescaped for c in ",= \n"), escaped
    field = string_field(text)
    assert "\n" not in field and field.startswith('"') and field.endswith('"')
    inner = field[1:-1]
    assert '"' not in inner.replace("\\\\", "").replace('\\"', ""), field


def durations(data: bytes) -> None:
    """Settings' durations: a positive whole number of ms, or ValueError."""
    text = data.decode("utf-8", "replace")
    for allow_zero in (False, True):
        try:
            ms = parse_duration_ms(text, allow_zero=allow_zero)
        except ValueError:
            continue
        assert isinstance(ms, int) and (ms >= 0 if allow_zero else ms > 0)


def _replay_file(content: bytes) -> None:
    """The simulator's check and reader on one file: rows or counted rejections, or the one
    refusal (EventsFileError), never another exception. The check refuses exactly the files the
    reader finds no valid row in, and counts every row the reader sees."""
    fd, name = tempfile.mkstemp(prefix="fuzz-events-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        path = Path(name)
        try:
            checked: EventsCheck | None = check_events(path)
        except EventsFileError:
            checked = None
        stats = SourceStats()
        try:
            read = list(read_rows(path, stats))
        except EventsFileError:
            assert checked is None, "the reader refused a file the check accepted"
            return
        assert len(read) == stats.rows
        if checked is None:
            assert stats.rows == 0, "the check refused a file with valid rows"
        else:
            assert stats.rows > 0 and stats.rows + stats.rejected_total == checked.rows_in_file
        assert all(isinstance(e["line"], int) and e["line"] >= 1 for e in stats.listed)
        for row in read:
            parse_row(row.payload)  # what the simulator publishes must pass the bridge's parser
    finally:
        os.unlink(name)


# --------------------------------------------------------------------------- names
# Thing and quantity names (streamkit.identifiers), checked against a reference written from the
# rule's text: whatever the row parser accepts is a name that every key, tag and topic made of it
# gives back unchanged; whatever the rule refuses, no key reader, topic builder or tag accepts.

_THING_FORBIDDEN = "|\\/+#"
_QUANTITY_FORBIDDEN = "|\\"


def reference_name(name: str, forbidden: str) -> bool:
    """The rule as docs/architecture.md states it, written without the implementation's
    shortcuts."""
    return (
        0 < len(name) <= MAX_CHARS
        and name[0] != " "
        and name[-1] != " "
        and all(c == " " or unicodedata.category(c)[0] not in "CZ" for c in name)
        and not any(c in forbidden for c in name)
    )


def unescape_tag(escaped: str) -> str:
    """A tag value as InfluxDB reads it back; an unescaped ``,``, ``=`` or space would end it."""
    out, i = [], 0
    while i < len(escaped):
        if escaped[i] == "\\" and escaped[i + 1 : i + 2] in (",", "=", " "):
            out.append(escaped[i + 1])
            i += 2
            continue
        assert escaped[i] not in ", =", escaped
        out.append(escaped[i])
        i += 1
    return "".join(out)


def names_hold(row: Row) -> None:
    """A row the parser accepted: its names are valid by the reference, and its keys, tags and
    topic give them back."""
    assert reference_name(row.thing, _THING_FORBIDDEN), row.thing
    topic = machine_topic("machines", row.thing)
    assert topic.split("/") == ["machines", row.thing] and not any(c in row.thing for c in "+#")
    assert unescape_tag(thing_tag(row.thing)) == row.thing
    for quantity in row.quantities:
        assert reference_name(quantity, _QUANTITY_FORBIDDEN), quantity
        assert parse_record_key(record_key(row.thing, quantity, row.timestamp_ms)) == (
            row.thing,
            quantity,
            row.timestamp_ms,
        )
        assert aggregate_key(row.thing, quantity, "tumbling-10000", 0).decode().split("|") == [
            row.thing,
            quantity,
            "tumbling-10000",
            "0",
        ]
        assert unescape_tag(quantity_tag(quantity)) == quantity


def _text(data: bytes) -> str:
    """Arbitrary bytes as a str that may hold lone surrogates (as JSON escapes can)."""
    return (
        data.decode("utf-8", "surrogatepass") if _decodes(data) else data.decode("utf-8", "replace")
    )


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


def names(data: bytes) -> None:
    """Arbitrary names (the first byte cuts the rest into a Thing and a quantity name): the rule
    agrees with its reference; a row made of them is a RowError with the name's reason or a row
    whose names hold; a refused name is refused by every key reader, topic builder and tag."""
    if not data:
        return
    body = data[1:]
    cut = data[0] % (len(body) + 1)
    thing, quantity = _text(body[:cut]), _text(body[cut:])
    for name, valid, forbidden in (
        (thing, is_thing(thing), _THING_FORBIDDEN),
        (quantity, is_quantity(quantity), _QUANTITY_FORBIDDEN),
    ):
        assert valid == reference_name(name, forbidden), name
    if not is_thing(thing):
        _refused(lambda: machine_topic("machines", thing), ValueError)
        _refused(lambda: thing_tag(thing), PointError)
        _refused(
            lambda: parse_record_key(f"{thing}|q|1".encode("utf-8", "surrogatepass")), ValueError
        )
    if not is_quantity(quantity):
        _refused(lambda: quantity_tag(quantity), PointError)
        _refused(
            lambda: parse_record_key(f"T|{quantity}|1".encode("utf-8", "surrogatepass")), ValueError
        )
    escaped = data[0] % 2 == 0
    payload = json.dumps(
        {"Thing": thing, "Timestamp": 1_554_000_000_000, quantity: 1.5}, ensure_ascii=escaped
    )
    if escaped:  # JSON decodes the escapes of two surrogates that form a pair as one character
        thing, quantity = json.loads(json.dumps([thing, quantity]))
    try:
        row = parse_row(payload.encode("utf-8", "surrogatepass"))
    except RowError as exc:
        expected = (
            "bad_thing"
            if not is_thing(thing)
            else "bad_quantity_name"
            if not is_quantity(quantity)
            else None
        )
        assert expected is None or exc.reason in (expected, "not_utf8"), (
            exc.reason,
            thing,
            quantity,
        )
        assert expected is not None or quantity in ("Thing", "Timestamp", "id"), (
            exc.reason,
            thing,
            quantity,
        )
        return
    names_hold(row)


def _refused(call: Callable[[], object], error: type[Exception]) -> None:
    try:
        call()
    except error:
        return
    raise AssertionError("a refused name was accepted")


def source_file(data: bytes) -> None:
    """The simulator's file reader on the bytes as they are (JSON lines, a JSON array, a BOM, any
    junk)."""
    _replay_file(data)


def source_file_gzip(data: bytes) -> None:
    """The same bytes gzipped, and that gzip cut short (a damaged download): read through the
    decompressor, or refused as one error."""
    packed = gzip.compress(data, mtime=0)
    _replay_file(packed)
    _replay_file(packed[: len(packed) // 2])


TARGETS: dict[str, Callable[[bytes], None]] = {
    "rows": rows,
    "raw_avro": raw_avro,
    "output_avro": output_avro,
    "line_protocol": line_protocol,
    "durations": durations,
    "source_file": source_file,
    "source_file_gzip": source_file_gzip,
    "names": names,
}
