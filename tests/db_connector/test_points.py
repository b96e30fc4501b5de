"""Records -> InfluxDB lines: exact text, escaping, refusals, and unique point identities."""

from __future__ import annotations

import math

import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from db_connector.batch import Batch
from db_connector.influx_writer import EXPIRED, InfluxWriter, Refused, dead_letter_reason
from db_connector.lineprotocol import PointError, string_field, tag_value
from db_connector.points import (
    MAX_DISCRIMINATED_GAP_MS,
    aggregate_converter,
    dead_letter_converter,
    joined_converter,
    joined_time_and_tags,
    late_converter,
    raw_converter,
)
from streamkit.wire import AvroCodec, MeasurementEncoder
from tests.support.avro import FlatRecordEncoder
from tests.support.names import bad_quantities, bad_things, quantities, things


def message(
    value: bytes | None,
    *,
    topic: str = "t",
    offset: int = 0,
    headers: list | None = None,
    timestamp_ms: int = 1_700_000_000_000,
) -> Message:
    return Message(
        topic=topic,
        partition=1,
        offset=offset,
        key=b"k",
        value=value,
        headers=headers,
        timestamp=(1, timestamp_ms),
    )


def measurement(thing: str, quantity: str, time_ms: int, value: float) -> bytes:
    return MeasurementEncoder().encode_row(thing, "row-1", time_ms, {quantity: value})[0][1]


def test_raw_line_is_exact() -> None:
    line = raw_converter()(message(measurement("Thing 1", "actSpeed_C11", 1_600_000_000_123, 12.5)))
    assert line == r"raw,quantity=actSpeed_C11,thing=Thing\ 1 value=12.5 1600000000123000000"


@pytest.mark.parametrize(
    "raw,escaped", [("a,b", r"a\,b"), ("a=b", r"a\=b"), ("a b", r"a\ b"), ("ä", "ä")]
)
def test_tag_values_are_escaped(raw: str, escaped: str) -> None:
    assert tag_value(raw) == escaped


@pytest.mark.parametrize(
    "raw,reason", [("", "empty_tag"), ("a\nb", "invalid_tag"), ("ends\\", "invalid_tag")]
)
def test_unwritable_tag_values_are_refused_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(PointError) as caught:
        tag_value(raw)
    assert caught.value.reason == reason


def test_string_fields_are_quoted_and_escaped() -> None:
    assert string_field('say "hi"\\\n') == '"say \\"hi\\"\\\\\\n"'


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_refused(value: float) -> None:
    with pytest.raises(PointError) as caught:
        raw_converter()(message(measurement("T", "q", 1, value)))
    assert caught.value.reason == "non_finite_value"


@pytest.mark.parametrize("value", [None, b"", b"\x99\x01xx", measurement("T", "q", 1, 1.0)[:-3]])
def test_undecodable_values_are_refused(value: bytes | None) -> None:
    with pytest.raises(PointError) as caught:
        raw_converter()(message(value))
    assert caught.value.reason == "undecodable"


def joined_value(left_ms: int, right_ms: int, *component: str) -> bytes:
    return FlatRecordEncoder("joined").encode(
        (
            "id",
            "T1",
            "speed",
            "torque",
            left_ms,
            right_ms,
            2.0,
            3.0,
            "mechanical_power",
            6.0,
            max(left_ms, right_ms),
            *component,
        )
    )


def test_a_pattern_pairs_result_is_tagged_with_its_component_an_older_record_with_none() -> None:
    convert = joined_converter()
    line = convert(message(joined_value(5000, 3000, "C12")))
    assert line.startswith("joined,component=C12,pair=speed:torque,result_name=mechanical_power,")
    older = joined_value(5000, 3000)[:-1]  # written before the component: no trailing string
    assert convert(message(older)).startswith("joined,pair=speed:torque,result_name=")
    with pytest.raises(PointError, match="not an Avro joined"):  # cut short: neither schema
        convert(message(older[:-1]))


def test_joined_line_is_exact() -> None:
    line = joined_converter()(message(joined_value(5000, 3000)))
    assert line == (
        "joined,pair=speed:torque,result_name=mechanical_power,thing=T1 result=6.0,left_value=2.0,"
        "right_value=3.0,left_time_ms=5000i,right_time_ms=3000i 5000004000"
    )


def test_joined_long_gap_keeps_its_identity_in_a_tag() -> None:
    line = joined_converter()(message(joined_value(0, 600_000)))
    assert line.startswith("joined,long_gap_ms=600000,pair=speed:torque,") and line.endswith(
        " 600000000000"
    )


@given(st.sets(st.tuples(st.integers(0, 2_000_000), st.integers(0, 2_000_000)), max_size=200))
def test_joined_point_identity_is_unique_per_pair(pairs: set[tuple[int, int]]) -> None:
    identities = {joined_time_and_tags(left, right) for left, right in pairs}
    assert len(identities) == len(pairs)
    for left, right in pairs:
        time_ns, tags = joined_time_and_tags(left, right)
        assert time_ns // 1_000_000 == max(left, right)  # still in the pair's millisecond
        assert bool(tags) == (abs(left - right) > MAX_DISCRIMINATED_GAP_MS)


def test_aggregate_line_omits_a_missing_stddev() -> None:
    encoder = FlatRecordEncoder("aggregate")
    single = encoder.encode(
        ("T1", "q", "sliding", 60_000, 10_000, 120_000, 180_000, 1, 2.0, 2.0, 2.0, None, None)
    )
    line = aggregate_converter()(message(single))
    assert line == (
        "aggregate,quantity=q,thing=T1,window=sliding-60000-10000 "
        "count=1i,mean=2.0,min=2.0,max=2.0,window_end_ms=180000i 120000000000"
    )
    several = encoder.encode(
        ("T1", "q", "tumbling", 10_000, 10_000, 0, 10_000, 3, 2.0, 1.0, 3.0, 1.0, None)
    )
    assert "window=tumbling-10000 " in aggregate_converter()(message(several))
    assert aggregate_converter()(message(several)).split(" ")[1].endswith(",stddev=1.0")
    session = encoder.encode(
        ("T1", "q", "session", 30_000, 30_000, 5_000, 65_000, 2, 2.0, 1.0, 3.0, None, 105_000)
    )
    assert aggregate_converter()(message(session)) == (
        "aggregate,quantity=q,thing=T1,window=session-30000 count=2i,mean=2.0,min=1.0,max=3.0,"
        "window_end_ms=65000i,duration_ms=60000i,closed_at_ms=105000i 5000000000"
    )


def test_an_aggregate_written_before_closed_at_ms_reads_as_without_it() -> None:
    """Records of the older schema (no closed_at_ms) stay in the topic for its retention: they
    convert as before; a record too short even for that is still refused."""
    older = FlatRecordEncoder("aggregate").encode(
        ("T1", "q", "tumbling", 10_000, 10_000, 0, 10_000, 1, 2.0, 2.0, 2.0, None, None)
    )[:-1]  # without the field's null branch
    assert aggregate_converter()(message(older)) == (
        "aggregate,quantity=q,thing=T1,window=tumbling-10000 count=1i,mean=2.0,min=2.0,max=2.0,"
        "window_end_ms=10000i 0"
    )
    with pytest.raises(PointError, match="not an Avro aggregate"):
        aggregate_converter()(message(older[:-1]))


def test_late_line_is_exact() -> None:
    value = FlatRecordEncoder("late").encode(
        ("T1", "q", 1000, 1.5, "r", "behind_watermark", "join", None)
    )
    assert late_converter()(message(value)) == (
        "late,quantity=q,reason=behind_watermark,stage=join,thing=T1 count=1i,value=1.5 1000000000"
    )


def test_dead_letters_are_counted_by_reason_and_position() -> None:
    convert = dead_letter_converter()
    headers = [
        ("reason", b"invalid_json"),
        ("detail", b'bad "x"'),
        ("mqtt_topic", b"machines/T1"),
        ("payload_bytes", b"17"),
    ]
    first = convert(message(b"{", offset=7, headers=headers, timestamp_ms=1000))
    assert first == (
        "dead_letter,partition=1,reason=invalid_json,source=mqtt bytes=17i,count=1i,"
        'detail="bad \\"x\\"" 1000000007'
    )
    second = convert(message(b"{", offset=8, headers=headers, timestamp_ms=1000))
    assert first.rsplit(" ", 1)[1] != second.rsplit(" ", 1)[1]  # same millisecond, distinct points
    bare = convert(message(b"xyz", offset=1, headers=None))
    assert ",reason=unknown,source=unknown bytes=3i" in bare


def test_a_batch_commits_past_refused_records_and_keeps_their_origin() -> None:
    batch = Batch(generation=0)
    converters = {"t": (raw_converter(), "raw")}
    errors = batch.add_chunk(
        [
            message(measurement("T", "q", 1, 1.0), offset=10),
            message(b"\x99", offset=11),
            message(measurement("T", "q", 2, 2.0), offset=12),
        ],
        converters,
    )
    assert errors == []
    assert (
        len(batch) == 3
        and len(batch.lines) == 2
        and [d.reason for d in batch.dead] == ["undecodable"]
    )
    assert [(tp.topic, tp.partition, tp.offset) for tp in batch.offsets()] == [("t", 1, 13)]
    assert batch.points_per_measurement(converters) == {"raw": 2}
    assert [m.offset() for m in batch.origins] == [10, 12]


class RefusingWriter(InfluxWriter):
    """The bisection alone: a server that refuses any request holding a 'bad' line, and drops
    the 'old' lines as InfluxDB drops points beyond their retention policy (writing the rest)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int]] = []

    def _post(self, policy: str, body: bytes) -> tuple[int | None, str]:
        self.requests.append((policy, body.count(b"\n") + 1))
        if b"bad" in body:
            return 400, "field type conflict"
        if old := body.count(b"old"):
            return 400, f"partial write: points beyond retention policy dropped={old}"
        return None, ""


def test_bisection_isolates_each_refused_line() -> None:
    lines = [f"raw,ok{i}" for i in range(64)]
    lines[5], lines[40] = "raw,bad5", "raw,bad40"
    writer = RefusingWriter()
    assert writer.write(lines) == [
        Refused(5, "400: field type conflict"),
        Refused(40, "400: field type conflict"),
    ]
    assert len(writer.requests) < 30  # ~2 log2(64) requests, not one per line


def test_each_policy_gets_its_lines_and_expired_points_are_counted_not_refused() -> None:
    lines = ["raw,old1", "joined,bad2", "raw,ok3", "dead_letter,ok4", "joined,ok5", "raw,old6"]
    expired = EXPIRED.labels("raw")
    before = expired._value.get()
    writer = RefusingWriter()
    assert writer.write(lines) == [Refused(1, "400: field type conflict")]
    assert expired._value.get() - before == 2  # one request, InfluxDB's dropped=2
    assert writer.requests[0] == ("raw", 3)
    assert {policy for policy, _ in writer.requests} == {"raw", "joined", "diagnostics"}


def test_a_point_past_the_cardinality_limits_has_a_reason_of_its_own() -> None:
    """InfluxDB 1.8's answers: the first measured here, the second as users report it
    (docs/influxdb-schema.md#cardinality-limits)."""
    values = (
        "400: partial write: max-values-per-tag limit exceeded (2/2): "
        'measurement="m" tag="q" value="c" dropped=1'
    )
    series = "400: partial write: max-series-per-database limit exceeded: (1000000) dropped=4783"
    assert dead_letter_reason(values) == dead_letter_reason(series) == "influx_series_limit"
    assert dead_letter_reason("400: field type conflict") == "influx_rejected"


def reference_raw_line(value: bytes) -> str:
    """The raw line from fastavro's decoding: what the hand-written decoder must match."""
    r = AvroCodec("measurement").decode(value)
    return (
        f"raw,quantity={tag_value(r['quantity'])},thing={tag_value(r['thing'])} "
        f"value={r['value']!r} {r['event_time_ms'] * 1_000_000}"
    )


@given(
    things,
    quantities,
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
def test_raw_fast_decoder_equals_fastavro(
    thing: str, quantity: str, time_ms: int, value: float, row_id: str
) -> None:
    encoded = AvroCodec("measurement").encode(
        {
            "thing": thing,
            "quantity": quantity,
            "event_time_ms": time_ms,
            "value": value,
            "row_id": row_id,
        }
    )
    convert = raw_converter()
    assert convert(message(encoded)) == reference_raw_line(encoded)
    # second time: from the prefix cache
    assert convert(message(encoded)) == reference_raw_line(encoded)


@given(st.binary(max_size=60), st.data())
def test_raw_fast_decoder_refuses_what_is_not_exactly_a_measurement(
    noise: bytes, data: st.DataObject
) -> None:
    valid = measurement("Thing1", "actSpeed_C11", 1_600_000_000_123, 12.5)
    cut = data.draw(st.integers(0, len(valid)))
    for candidate in (noise, valid[:cut] + noise, valid + noise[:1]):
        try:
            line = raw_converter()(message(candidate))
        except PointError as exc:
            assert exc.reason in {
                "undecodable",
                "non_finite_value",
                "bad_thing",
                "bad_quantity_name",
            }
            continue
        assert candidate == valid or line == reference_raw_line(candidate)


def test_raw_tag_problems_keep_their_reason_on_the_fast_path() -> None:
    with pytest.raises(PointError) as caught:
        raw_converter()(message(measurement("", "q", 1, 1.0)))
    assert caught.value.reason == "bad_thing"


def _records_named(thing: str, quantity: str) -> dict[str, bytes]:
    """One record of each kind the connector tags with a thing and quantity names."""
    return {
        "raw": measurement(thing, quantity, 1, 1.0),
        "joined": FlatRecordEncoder("joined").encode(
            ("id", thing, quantity, "torque", 1, 2, 2.0, 3.0, "power", 6.0, 2)
        ),
        "aggregates": FlatRecordEncoder("aggregate").encode(
            (thing, quantity, "tumbling", 10, 10, 0, 10, 1, 2.0, 2.0, 2.0, None, None)
        ),
        "late": FlatRecordEncoder("late").encode(
            (thing, quantity, 1000, 1.5, "r", "behind_watermark", "join", None)
        ),
    }


_CONVERTERS = {
    "raw": raw_converter,
    "joined": joined_converter,
    "aggregates": aggregate_converter,
    "late": late_converter,
}


@settings(max_examples=50, deadline=None)
@given(
    st.one_of(
        bad_things.map(lambda bad: (bad[0], "q", "bad_thing")),
        bad_quantities.map(lambda bad: ("T1", bad[0], "bad_quantity_name")),
    )
)
def test_no_stage_output_with_a_bad_name_becomes_a_point(bad: tuple[str, str, str]) -> None:
    """Records anyone could have written to the topics: a name the bridge would have refused is
    refused here with the bridge's reason (the batch dead-letters it), never made a tag."""
    thing, quantity, reason = bad
    try:
        records = _records_named(thing, quantity)
    except UnicodeEncodeError:  # a lone surrogate: no Avro writer can even write it
        return
    for kind, value in records.items():
        with pytest.raises(PointError) as caught:
            _CONVERTERS[kind]()(message(value))
        assert caught.value.reason == reason, kind


def test_a_record_with_a_bad_name_is_dead_lettered_by_the_batch() -> None:
    batch = Batch(generation=0)
    converters = {"t": (raw_converter(), "raw")}
    batch.add_chunk(
        [
            message(measurement("M1/+", "q", 1, 1.0), offset=3),
            message(measurement("M1", "q", 1, 1.0), offset=4),
            message(measurement("M1", "a|b", 1, 1.0), offset=5),
        ],
        converters,
    )
    assert [(d.message.offset(), d.reason) for d in batch.dead] == [
        (3, "bad_thing"),
        (5, "bad_quantity_name"),
    ]
    assert batch.lines == ["raw,quantity=q,thing=M1 value=1.0 1000000"]
