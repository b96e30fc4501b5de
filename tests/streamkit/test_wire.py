"""The wire contract (streamkit.wire): keys, partitions, window labels, dead-letter headers and
Avro round trips, and that every writer and reader of them agrees."""

from __future__ import annotations

import zlib

import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from db_connector.points import aggregate_converter, dead_letter_converter
from operators import ms
from streamkit.wire import (
    AvroCodec,
    MeasurementEncoder,
    RecordKey,
    WindowLabel,
    aggregate_key,
    avro_long,
    avro_string,
    dead_letters,
    machine_topic,
    parse_record_key,
    parse_window_label,
    read_long,
    record_key,
    shard_prefix,
    split_measurement,
    thing_partition,
    window_label,
)
from tests.support.avro import FlatRecordEncoder
from tests.support.names import quantities, things
from windowing.windows import WindowSpec, parse_windows

names = things  # what the bridge lets in: streamkit.identifiers
times = st.integers(-(2**62), 2**62)


@given(names, quantities, times)
def test_record_key_round_trips(thing: str, quantity: str, time_ms: int) -> None:
    key = record_key(thing, quantity, time_ms)
    assert parse_record_key(key) == RecordKey(thing, quantity, time_ms)


def test_record_key_is_the_documented_bytes() -> None:
    assert (
        record_key("R0815", "actSpeed_C11", 1_554_096_380_468)
        == b"R0815|actSpeed_C11|1554096380468"
    )
    assert aggregate_key("T1", "q", "tumbling-10000", 5) == b"T1|q|tumbling-10000|5"


@pytest.mark.parametrize(
    "key",
    [
        b"",
        b"T1|q",
        b"T1|q|soon",
        b"\xff|q|1",
        b"a|b|q|1",
        b"T1|q\n|1",
        b"T1||1",
        b"T1|q|+1",
        b"T1|q| 1",
        b"T1|q|1_0",
    ],
)
def test_parse_record_key_refuses_what_is_not_a_key(key: bytes) -> None:
    with pytest.raises(ValueError):
        parse_record_key(key)


@given(names, st.integers(1, 64))
def test_thing_partition_is_crc32_of_the_thing(thing: str, partitions: int) -> None:
    partition = thing_partition(thing, partitions)
    assert partition == zlib.crc32(thing.encode()) % partitions and 0 <= partition < partitions


@given(names, st.integers(1, 8), st.integers(1, 8))
def test_a_things_shard_is_one_bridge_and_lines_up_with_its_partition(
    thing: str, shards: int, per_shard: int
) -> None:
    topic = machine_topic("machines", thing, shards)
    subscribed = [
        shard
        for shard in range(shards)
        if topic.startswith(shard_prefix("machines", shard, shards) + "/")
    ]
    assert len(subscribed) == 1  # exactly one bridge's subscription <prefix>/<shard>/# matches
    assert topic.endswith("/" + thing)
    # with partitions a multiple of the shards, a shard's bridge writes only
    # partitions = shard mod B
    assert thing_partition(thing, shards * per_shard) % shards == subscribed[0]


def test_one_shard_is_the_plain_topic() -> None:
    assert (
        machine_topic("machines", "M-1") == "machines/M-1"
        and shard_prefix("machines", 0, 1) == "machines"
    )
    assert machine_topic("machines", "M-1", 4) == f"machines/{zlib.crc32(b'M-1') % 4}/M-1"


@pytest.mark.parametrize(
    ("kind", "size", "slide", "label"),
    [
        ("tumbling", 10_000, 10_000, "tumbling-10000"),
        ("sliding", 60_000, 10_000, "sliding-60000-10000"),
        (
            "sliding",
            60_000,
            60_000,
            "sliding-60000-60000",
        ),  # the drift: the connector wrote sliding-60000
        ("session", 30_000, 30_000, "session-30000"),
    ],
)
def test_window_label(kind: str, size: int, slide: int, label: str) -> None:
    assert window_label(kind, size, slide) == label == WindowSpec(kind, ms(size), ms(slide)).label
    assert parse_window_label(label) == WindowLabel(kind, size, slide)


@pytest.mark.parametrize(
    "label",
    [
        "",
        "tumbling",
        "tumbling-",
        "sliding-60000",
        "session-1-2",
        "hopping-5",
        "tumbling-x",
        "tumbling--5",
    ],
)
def test_parse_window_label_refuses_what_is_not_a_label(label: str) -> None:
    with pytest.raises(ValueError):
        parse_window_label(label)


def _message(value: bytes, headers: list | None = None) -> Message:
    return Message(
        topic="t",
        partition=1,
        offset=3,
        key=b"k",
        value=value,
        headers=headers,
        timestamp=(1, 1000),
    )


@pytest.mark.parametrize(
    ("tumbling", "sliding"), [("10s", "off"), ("off", "60s/10s"), ("off", "60s/60s")]
)
def test_the_connectors_window_tag_is_the_jobs_label(tumbling: str, sliding: str) -> None:
    """The aggregate job keys a window by WindowSpec.label; the connector tags its point from the
    Avro record. Both must be the one label, also for a sliding window whose slide is its size
    (the connector wrote sliding-60000 there, against docs/influxdb-schema.md)."""
    (spec,) = parse_windows(tumbling, sliding)
    value = FlatRecordEncoder("aggregate").encode(
        (
            "T1",
            "q",
            spec.kind,
            spec.size_ms,
            spec.slide_ms,
            0,
            spec.size_ms,
            1,
            2.0,
            2.0,
            2.0,
            None,
            None,
        )
    )
    assert f",window={spec.label} " in aggregate_converter()(_message(value))


def test_dead_letter_headers_read_back() -> None:
    bridge = dead_letters.mqtt_headers("invalid_json", "x" * 600, "machines/T1", 70_000)
    assert [name for name, _ in bridge] == ["reason", "detail", "mqtt_topic", "payload_bytes"]
    read = dead_letters.read_headers(bridge)
    assert (
        len(read["detail"]) == dead_letters.DETAIL_CHARS and dead_letters.source_of(read) == "mqtt"
    )
    connector = dead_letters.record_headers("influx_rejected", "bad", "machinedata.raw", 2, 9, 17)
    assert dead_letters.read_headers(connector) == {
        "reason": "influx_rejected",
        "detail": "bad",
        "source": "machinedata.raw",
        "source_partition": "2",
        "source_offset": "9",
        "payload_bytes": "17",
    }
    assert dead_letters.source_of(dead_letters.read_headers(None)) == "unknown"
    line = dead_letter_converter()(_message(b"{", bridge))
    assert line.startswith(
        "dead_letter,partition=1,reason=invalid_json,source=mqtt bytes=70000i,count=1i,"
    )


@settings(max_examples=200, deadline=None)
@given(
    names,
    quantities,
    times,
    st.floats(allow_nan=False),
    st.text(st.characters(blacklist_categories=["Cs"])),
)
def test_measurement_encoder_and_reader_round_trip(
    thing: str, quantity: str, time_ms: int, value: float, row_id: str
) -> None:
    ((_, payload),) = MeasurementEncoder().encode_row(thing, row_id, time_ms, {quantity: value})
    head_end, read_time, read_value = split_measurement(payload)
    assert payload[:head_end] == avro_string(thing) + avro_string(quantity)
    assert (read_time, read_value) == (time_ms, value)
    assert AvroCodec("measurement").decode(payload) == {
        "thing": thing,
        "quantity": quantity,
        "event_time_ms": time_ms,
        "value": value,
        "row_id": row_id,
    }


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_round_trips(number: int) -> None:
    encoded = avro_long(number)
    assert read_long(encoded + b"tail", 0) == (number, len(encoded))


def test_split_measurement_refuses_trailing_bytes() -> None:
    ((_, payload),) = MeasurementEncoder().encode_row("T", "r", 1, {"q": 1.0})
    with pytest.raises(ValueError):
        split_measurement(payload + b"\x00")


def test_a_flood_of_quantity_names_keeps_the_encoders_memory_bounded() -> None:
    """A machine sending a new name in every message (the soak's replay found the cache
    growing with every name): the cache stays within its bound, and what it encodes does not
    change when it is cleared."""
    from streamkit.wire.avro import QUANTITY_CACHE

    encoder = MeasurementEncoder()
    names = [f"junk_{n}" for n in range(QUANTITY_CACHE + 5)]
    for name in names:
        encoder.encode_row("M1", "r", 1, {name: 1.0, "actSpeed_C11": 2.0})
        assert len(encoder._quantity_cache) <= QUANTITY_CACHE
    for name in (names[0], names[-1], "actSpeed_C11"):
        ((_, payload),) = encoder.encode_row("M1", "r", 1, {name: 1.0})
        assert AvroCodec("measurement").decode(payload)["quantity"] == name
