"""One Kafka record -> one InfluxDB line, per record kind (docs/influxdb-schema.md).

A point's identity (measurement, tags, time) comes from the record's content, or for dead
letters from its Kafka position, so writing a record twice overwrites the same point: replays
after a crash cannot double anything in InfluxDB.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka import Message

from db_connector.lineprotocol import (
    NS_PER_MS,
    PointError,
    float_field,
    line,
    pair_tag,
    quantity_tag,
    string_field,
    tag_value,
    thing_tag,
)
from streamkit.errors import ConfigError
from streamkit.kafka_clients import record_position
from streamkit.wire import (
    AvroCodec,
    dead_letters,
    read_record,
    schema_before,
    schema_text,
    split_measurement,
    window_label,
)
from streamkit.wire.registry import unframe

#: Pairs whose inputs are further apart than this keep their identity in a tag instead of the
#: sub-millisecond discriminator (which has room for 2 * 499,999 + 1 < 1,000,000 ns).
MAX_DISCRIMINATED_GAP_MS = 499_999

Converter = Callable[[Message], str]
#: A written line -> the time (ms) its end-to-end latency counts from.
LatencyReference = Callable[[str], int]


def _decoder(schema: str) -> Callable[[bytes | None], dict[str, Any]]:
    codec = AvroCodec(schema)

    def decode(value: bytes | None) -> dict[str, Any]:
        if value is None:
            raise PointError("undecodable", f"record without a value (expected Avro {schema})")
        try:
            return codec.decode(value)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, ...
            raise PointError(
                "undecodable", f"not an Avro {schema}: {type(exc).__name__}: {exc}"
            ) from None

    return decode


RAW_PREFIX_CACHE = 100_000


def raw_converter() -> Converter:
    """The hot path (most records are raw), decoded by hand (streamkit.wire.split_measurement):
    fastavro's generic reader was 37% of the connector's time. The Avro bytes of (thing,
    quantity) open every record and decide the line's whole measurement-and-tags prefix, so
    they key a cache of ready prefixes. Strict like fastavro: any malformed record is refused
    (the unit tests compare both)."""
    prefixes: dict[bytes, str] = {}
    slow = _decoder("measurement")

    def convert(message: Message) -> str:
        value = message.value()
        if value is None:
            raise PointError("undecodable", "record without a value (expected Avro measurement)")
        try:
            head_end, time_ms, number = split_measurement(value)
            head = value[:head_end]
            prefix = prefixes.get(head)
            if prefix is None:
                record = slow(value)  # once per (thing, quantity): full validation, real strings
                prefix = (
                    f"raw,quantity={quantity_tag(record['quantity'])},"
                    f"thing={thing_tag(record['thing'])} value="
                )
                if len(prefixes) >= RAW_PREFIX_CACHE:
                    prefixes.clear()
                prefixes[head] = prefix
        except PointError:
            raise
        except (IndexError, TypeError, ValueError, struct.error):  # UnicodeDecodeError: ValueError
            slow(value)  # raises the reader's own precise reason
            raise PointError("undecodable", "not an Avro measurement") from None
        if not math.isfinite(number):
            raise PointError("non_finite_value", f"field value is {number}")
        return f"{prefix}{number!r} {time_ms * NS_PER_MS}"

    return convert


def joined_time_and_tags(left_ms: int, right_ms: int) -> tuple[int, str]:
    """Time (ns) and extra tags that keep pairs sharing max(left, right) apart."""
    gap = abs(right_ms - left_ms)
    event_ms = max(left_ms, right_ms)
    if gap > MAX_DISCRIMINATED_GAP_MS:
        return event_ms * NS_PER_MS, f",long_gap_ms={right_ms - left_ms}"
    return event_ms * NS_PER_MS + 2 * gap + (1 if right_ms > left_ms else 0), ""


def joined_converter() -> Converter:
    decode = _evolving_decoder("joined")

    def convert(message: Message) -> str:
        r = decode(message.value())
        time_ns, gap_tag = joined_time_and_tags(r["left_time_ms"], r["right_time_ms"])
        # tag keys in sorted order: component < long_gap_ms < pair < result_name < thing; an
        # explicit pair has no component (InfluxDB has no empty tag value)
        pair = pair_tag(r["left_quantity"], r["right_quantity"])
        component = f"component={tag_value(r['component'])}," if r["component"] else ""
        tags = component + (f"{gap_tag[1:]},pair={pair}" if gap_tag else f"pair={pair}")
        tags += f",result_name={tag_value(r['result_name'])},thing={thing_tag(r['thing'])}"
        fields = (
            f"result={float_field('result', r['result'])},"
            f"left_value={float_field('left_value', r['left_value'])},"
            f"right_value={float_field('right_value', r['right_value'])},"
            f"left_time_ms={r['left_time_ms']}i,right_time_ms={r['right_time_ms']}i"
        )
        return line("joined", tags, fields, time_ns)

    return convert


def _evolving_decoder(schema: str) -> Callable[[bytes | None], dict[str, Any]]:
    """The decoder of ``schema``, which also reads records written before its last field was
    added (``streamkit.wire.ADDED_LAST``; the topic keeps them for its retention): those end
    one field early, and Avro's schema resolution from the older schema gives them the field's
    default."""
    decode = _decoder(schema)
    older = fastavro.parse_schema(json.loads(schema_before(schema)))
    reader = fastavro.parse_schema(json.loads(schema_text(schema)))

    def decode_any(value: bytes | None) -> dict[str, Any]:
        try:
            return decode(value)
        except PointError as refused:
            if value is None:
                raise
            try:
                return read_record(value, older, reader)
            except Exception:  # not an older record either: the current schema's reason
                raise refused from None

    return decode_any


def aggregate_converter() -> Converter:
    decode = _evolving_decoder("aggregate")

    def convert(message: Message) -> str:
        r = decode(message.value())
        window = tag_value(
            window_label(r["window_kind"], r["window_size_ms"], r["window_slide_ms"])
        )
        fields = (
            f"count={r['count']}i,mean={float_field('mean', r['mean'])},"
            f"min={float_field('min', r['min'])},max={float_field('max', r['max'])},"
            f"window_end_ms={r['window_end_ms']}i"
        )
        if r["stddev"] is not None:
            fields += f",stddev={float_field('stddev', r['stddev'])}"
        if r["window_kind"] == "session":  # start and end are its first and last record
            fields += f",duration_ms={r['window_end_ms'] - r['window_start_ms']}i"
        if r["closed_at_ms"] is not None:
            fields += f",closed_at_ms={r['closed_at_ms']}i"
        return line(
            "aggregate",
            f"quantity={quantity_tag(r['quantity'])},thing={thing_tag(r['thing'])},window={window}",
            fields,
            r["window_start_ms"] * NS_PER_MS,
        )

    return convert


def point_time_ms(line_text: str) -> int:
    """The point's own time: the event time of a raw point, max(left, right) of a pair (its
    sub-millisecond discriminator stays below one millisecond)."""
    return int(line_text.rsplit(" ", 1)[1]) // NS_PER_MS


_WINDOW_END = ",window_end_ms="
_CLOSED_AT = ",closed_at_ms="


def window_end_ms(line_text: str) -> int:
    """An aggregate's window end (a session's last record), read back from its line: only the
    sampled points pay for it, and nothing is decoded twice. Unambiguous: tag values have their
    commas and equal signs escaped, so only the field can hold this text."""
    return _integer_field(line_text, line_text.rindex(_WINDOW_END) + len(_WINDOW_END))


def window_closable_ms(line_text: str) -> int:
    """Where an aggregate's latency counts from: when the data made its window closable
    (``closed_at_ms``), so the allowed lateness and a sparse key's wait are not counted; else
    (an idle flush, an older record) its window's end. Read back like :func:`window_end_ms`."""
    at = line_text.rfind(_CLOSED_AT)
    return window_end_ms(line_text) if at < 0 else _integer_field(line_text, at + len(_CLOSED_AT))


def _integer_field(line_text: str, start: int) -> int:
    """The integer field value starting at ``start`` (up to its ``i`` suffix)."""
    return int(line_text[start : line_text.index("i", start)])


def late_converter() -> Converter:
    decode = _decoder("late")

    def convert(message: Message) -> str:
        r = decode(message.value())
        tags = (
            f"quantity={quantity_tag(r['quantity'])},reason={tag_value(r['reason'])},"
            f"stage={tag_value(r['stage'])},thing={thing_tag(r['thing'])}"
        )
        fields = f"count=1i,value={float_field('value', r['value'])}"
        if r["watermark_ms"] is not None:
            fields += f",watermark_ms={r['watermark_ms']}i"
        return line("late", tags, fields, r["event_time_ms"] * NS_PER_MS)

    return convert


def opstats_converter() -> Converter:
    """One component's reference cycle: an ``opstats`` point with its figures and one
    ``opstats_band`` point per band, at the cycle's start; the rating is a tag, so figures of
    two ratings never overwrite each other (docs/influxdb-schema.md)."""
    decode = _decoder("opstats")

    def convert(message: Message) -> str:
        r = decode(message.value())
        names, band_ms, cumulative = r["band_names"], r["band_ms"], r["cumulative_ms"]
        if not (len(names) == len(band_ms) == len(cumulative) >= 2):
            raise PointError("undecodable", f"bands of unequal lengths: {names}")
        time_ns = r["cycle_start_ms"] * NS_PER_MS
        tags = (
            f"component={tag_value(r['component'])},power={tag_value(r['power_name'])},"
            f"rating={tag_value(r['rating_id'])},thing={thing_tag(r['thing'])}"
        )
        rated_w = r["rated_power_kw"] * 1000.0
        data_ms, cycle_ms = r["data_ms"], r["cycle_end_ms"] - r["cycle_start_ms"]
        if not (rated_w > 0 and math.isfinite(rated_w) and 0 <= data_ms <= cycle_ms):
            raise PointError(
                "undecodable", f"rated {r['rated_power_kw']} kW, {data_ms} of {cycle_ms} ms"
            )
        figures = {
            "duty_pct": r["duty_pct"],
            "duty_rating_pct": r["duty_rating_pct"],
            "motoring_kwh": r["motoring_kwh"],
            "regenerative_kwh": r["regenerative_kwh"],
            "energy_kwh": r["motoring_kwh"] + r["regenerative_kwh"],
            "mean_w": r["mean_w"],
            "mean_pct": 100.0 * r["mean_w"] / rated_w,
            "peak_w": r["peak_w"],
            "peak_pct": 100.0 * r["peak_w"] / rated_w,
            "rated_power_kw": r["rated_power_kw"],
            "data_s": data_ms / 1000.0,
            "no_data_s": (cycle_ms - data_ms) / 1000.0,
            "overload_s": band_ms[-1] / 1000.0,
        }
        fields = ",".join(f"{name}={float_field(name, value)}" for name, value in figures.items())
        fields += (
            f",duty_exceeded={int(r['duty_pct'] > r['duty_rating_pct'])}i"
            f",rating_defaulted={int(r['rating_defaulted'])}i,cycle_ms={cycle_ms}i"
        )
        lines = [line("opstats", tags, fields, time_ns)]
        for name, ms, total in zip(names, band_ms, cumulative, strict=True):
            band_fields = (
                f"seconds={ms / 1000.0!r},cumulative_hours={total / 3_600_000.0!r},"
                f"share_pct={100.0 * ms / data_ms if data_ms else 0.0!r}"
            )
            lines.append(
                line("opstats_band", f"band={tag_value(name)},{tags}", band_fields, time_ns)
            )
        return "\n".join(lines)

    return convert


def overload_converter() -> Converter:
    """One overload alert fired or resolved: an ``overload`` point at its cycle's start, the
    status a tag (a dashboard's annotations; docs/influxdb-schema.md)."""
    decode = _decoder("overload")

    def convert(message: Message) -> str:
        r = decode(message.value())
        if r["status"] not in ("firing", "resolved"):
            raise PointError("undecodable", f"overload status {r['status']!r}")
        rated_w = r["rated_power_kw"] * 1000.0
        if not (rated_w > 0 and math.isfinite(rated_w)):
            raise PointError("undecodable", f"rated {r['rated_power_kw']} kW")
        tags = (
            f"component={tag_value(r['component'])},rating={tag_value(r['rating_id'])},"
            f"status={tag_value(r['status'])},thing={thing_tag(r['thing'])}"
        )
        figures = {
            "duty_pct": r["duty_pct"],
            "duty_rating_pct": r["duty_rating_pct"],
            "peak_pct": 100.0 * r["peak_w"] / rated_w,
            "overload_s": r["overload_ms"] / 1000.0,
        }
        fields = ",".join(f"{name}={float_field(name, value)}" for name, value in figures.items())
        fields += (
            f",since_ms={r['since_ms']}i,cycle_end_ms={r['cycle_end_ms']}i,"
            f"why={string_field(r['why'])}"
        )
        return line("overload", tags, fields, r["cycle_start_ms"] * NS_PER_MS)

    return convert


def dead_letter_converter() -> Converter:
    """Dead letters are counted, not decoded: their value is by definition unreadable."""

    def convert(message: Message) -> str:
        headers = dead_letters.read_headers(message.headers())
        source = dead_letters.source_of(headers)
        size = headers.get(dead_letters.PAYLOAD_BYTES, "")
        size_value = int(size) if size.isdigit() else len(message.value() or b"")
        timestamp_ms = max(message.timestamp()[1], 0)
        _topic, partition, offset = record_position(message)
        reason = tag_value(headers.get(dead_letters.REASON) or "unknown")
        tags = f"partition={partition},reason={reason},source={tag_value(source)}"
        detail = headers.get(dead_letters.DETAIL, "")[: dead_letters.DETAIL_CHARS]
        fields = f"bytes={size_value}i,count=1i,detail={string_field(detail)}"
        return line("dead_letter", tags, fields, timestamp_ms * NS_PER_MS + offset % NS_PER_MS)

    return convert


@dataclass(frozen=True)
class Kind:
    """A record kind as named in CONNECTOR_TOPICS: its topic setting, measurement, converter,
    and where its end-to-end latency counts from (None: no event time worth measuring from)."""

    topic_setting: str
    measurement: str
    converter: Callable[[], Converter]
    latency_reference: LatencyReference | None = None


KINDS: dict[str, Kind] = {
    "raw": Kind("raw_topic", "raw", raw_converter, point_time_ms),
    "joined": Kind("joined_topic", "joined", joined_converter, point_time_ms),
    "aggregates": Kind("aggregates_topic", "aggregate", aggregate_converter, window_closable_ms),
    "late": Kind("late_topic", "late", late_converter),
    "opstats": Kind("opstats_topic", "opstats", opstats_converter),
    "overloads": Kind("overloads_topic", "overload", overload_converter),
    "dlq": Kind("dlq_topic", "dead_letter", dead_letter_converter),
}


def converters_for(kinds: list[str], settings: Any) -> dict[str, tuple[Converter, str]]:
    """Topic name -> (converter, measurement) for the configured kinds."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ConfigError(
            "CONNECTOR_TOPICS", f"unknown kind(s) {unknown} (known: {', '.join(sorted(KINDS))})"
        )
    framed = getattr(settings, "schema_registry", False)
    return {
        getattr(settings, KINDS[k].topic_setting): (
            unframed(KINDS[k].converter()) if framed and k != "dlq" else KINDS[k].converter(),
            KINDS[k].measurement,
        )
        for k in kinds
    }


def unframed(convert: Converter) -> Converter:
    """``convert`` for values in the schema registry's wire format: the 5-byte header checked
    and cut off, the Avro body converted as without a registry. A dead letter made of the
    record keeps the value as it came."""

    def convert_framed(message: Message) -> str:
        value = message.value()
        if value is None:
            return convert(message)
        try:
            _schema_id, body = unframe(value)
        except ValueError as exc:
            raise PointError("undecodable", str(exc)) from None
        message.set_value(body)
        try:
            return convert(message)
        finally:
            message.set_value(value)

    return convert_framed


def latency_references() -> dict[str, LatencyReference]:
    """Measurement -> where its end-to-end latency counts from, for the kinds that have one."""
    return {
        kind.measurement: kind.latency_reference
        for kind in KINDS.values()
        if kind.latency_reference
    }
