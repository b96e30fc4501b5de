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
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import fastavro

from db_connector.lineprotocol import NS_PER_MS, PointError, string_field, tag_value
from db_connector.points import KINDS, raw_converter
from mqtt_bridge.records import RowSplitter
from simulator.events_file import EventsFileError
from simulator.source import EventsCheck, SourceStats, check_events, read_rows
from streamkit.wire import AvroCodec, parsed_schema
from streamkit.durations import parse_duration_ms
from streamkit.events import RowError, check_event_time, parse_row


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
    return record


def raw_avro(data: bytes) -> None:
    """The connector's hand-written raw decoder against fastavro. Where fastavro refuses, the
    fast path refuses; where the fast path makes a line, fastavro read the same record. Only
    non-canonical bytes (over-long varints, which fastavro reads modulo 2**64) may be refused
    by the fast path alone."""
    try:
        got: str | None = _RAW_FAST(FakeMessage(data))
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
        want: str | None = (f"raw,quantity={tag_value(r['quantity'])},thing={tag_value(r['thing'])} "
                            f"value={r['value']!r} {r['event_time_ms'] * NS_PER_MS}")
    except PointError:
        want = None
    if got is not None or _MEASUREMENT.encode(r) == data:
        assert got == want, (got, want)


_CONVERTERS = {kind: KINDS[kind].converter() for kind in ("joined", "aggregates", "late", "dlq")}


def output_avro(data: bytes) -> None:
    """The other record kinds the connector reads: a line or a PointError, nothing else. The
    first byte picks the kind; dead letters get the rest as a header too."""
    if not data:
        return
    kinds = sorted(_CONVERTERS)
    kind, body = kinds[data[0] % len(kinds)], data[1:]
    headers = [("reason", body[:40]), ("payload_bytes", body[40:60]), ("detail", body[60:])]
    try:
        line = _CONVERTERS[kind](FakeMessage(body, headers if kind == "dlq" else None))
    except PointError:
        return
    assert "\n" not in line, line


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
    assert '"' not in inner.replace('\\\\', "").replace('\\"', ""), field


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
        assert all(entry["line"] >= 1 for entry in stats.listed)
        for row in read:
            parse_row(row.payload)  # what the simulator publishes must pass the bridge's parser
    finally:
        os.unlink(name)


def source_file(data: bytes) -> None:
    """The simulator's file reader on the bytes as they are (JSON lines, a JSON array, a BOM, any junk)."""
    _replay_file(data)


def source_file_gzip(data: bytes) -> None:
    """The same bytes gzipped, and that gzip cut short (a damaged download): read through the
    decompressor, or refused as one error."""
    packed = gzip.compress(data, mtime=0)
    _replay_file(packed)
    _replay_file(packed[:len(packed) // 2])


TARGETS: dict[str, Callable[[bytes], None]] = {
    "rows": rows, "raw_avro": raw_avro, "output_avro": output_avro, "line_protocol": line_protocol,
    "durations": durations, "source_file": source_file, "source_file_gzip": source_file_gzip}
