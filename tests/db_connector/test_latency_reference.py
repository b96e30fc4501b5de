"""Where each measurement's end-to-end latency counts from, read back from the very lines the
converters write for real Avro records: raw the event time, joined the later input, aggregates
when the data made their window closable (closed_at_ms), else the window's end (a session's last
record); and the connector observing it for a batch."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Message
from prometheus_client import REGISTRY

from db_connector.batch import Batch
from db_connector.connector import Connector
from db_connector.points import (
    KINDS,
    aggregate_converter,
    joined_converter,
    latency_references,
    point_time_ms,
    raw_converter,
    window_closable_ms,
    window_end_ms,
)
from streamkit.wire import AvroCodec


def message(value: bytes, topic: str = "t") -> Message:
    return Message(
        topic=topic, partition=0, offset=0, key=b"k", value=value, timestamp=(1, 1_700_000_000_000)
    )


def raw_record(time_ms: int, thing: str = "Thing 1") -> bytes:
    return AvroCodec("measurement").encode(
        {
            "thing": thing,
            "quantity": "actSpeed_C11",
            "event_time_ms": time_ms,
            "value": 12.5,
            "row_id": "r1",
        }
    )


def joined_record(left_ms: int, right_ms: int) -> bytes:
    return AvroCodec("joined").encode(
        {
            "id": "r1",
            "thing": "T1",
            "left_quantity": "speed",
            "right_quantity": "torque",
            "left_time_ms": left_ms,
            "right_time_ms": right_ms,
            "left_value": 2.0,
            "right_value": 3.0,
            "result_name": "mechanical_power",
            "result": 6.0,
            "event_time_ms": max(left_ms, right_ms),
        }
    )


def aggregate_record(
    kind: str,
    size_ms: int,
    slide_ms: int,
    start_ms: int,
    end_ms: int,
    *,
    thing: str = "T1",
    stddev: float | None = 1.0,
    closed_at_ms: int | None = None,
) -> bytes:
    return AvroCodec("aggregate").encode(
        {
            "thing": thing,
            "quantity": "q",
            "window_kind": kind,
            "window_size_ms": size_ms,
            "window_slide_ms": slide_ms,
            "window_start_ms": start_ms,
            "window_end_ms": end_ms,
            "count": 3,
            "mean": 2.0,
            "min": 1.0,
            "max": 3.0,
            "stddev": stddev,
            "closed_at_ms": closed_at_ms,
        }
    )


@pytest.mark.parametrize("time_ms", [1_600_000_000_123, 0, 999, -1_001])
def test_raw_latency_counts_from_the_event_time(time_ms: int) -> None:
    assert point_time_ms(raw_converter()(message(raw_record(time_ms)))) == time_ms


# the last: a long gap
@pytest.mark.parametrize(
    "left_ms,right_ms",
    [(5_000, 3_000), (3_000, 5_000), (4_000, 4_000), (1_700_000_000_000, 1_700_000_600_000)],
)
def test_joined_latency_counts_from_the_later_input(left_ms: int, right_ms: int) -> None:
    line = joined_converter()(message(joined_record(left_ms, right_ms)))
    assert point_time_ms(line) == max(left_ms, right_ms)


@pytest.mark.parametrize(
    "kind,size_ms,slide_ms,start_ms,end_ms,stddev",
    [
        ("tumbling", 10_000, 10_000, 1_700_000_000_000, 1_700_000_010_000, 1.0),
        ("sliding", 60_000, 10_000, 1_700_000_000_000, 1_700_000_060_000, None),
        # end: the session's last record
        ("session", 30_000, 30_000, 1_700_000_005_000, 1_700_000_065_000, 0.5),
    ],
)
def test_aggregate_latency_counts_from_the_window_end(
    kind: str, size_ms: int, slide_ms: int, start_ms: int, end_ms: int, stddev: float | None
) -> None:
    line = aggregate_converter()(
        message(aggregate_record(kind, size_ms, slide_ms, start_ms, end_ms, stddev=stddev))
    )
    # no closed_at_ms: an idle flush closed it
    assert window_end_ms(line) == window_closable_ms(line) == end_ms
    # the point's own time is the start: not what latency counts from
    assert point_time_ms(line) == start_ms


@pytest.mark.parametrize(
    "kind,end_ms,closed_at_ms",
    [
        # the record 10 s (the lateness) past the end
        ("tumbling", 1_700_000_010_000, 1_700_000_020_000),
        ("session", 1_700_000_065_000, 1_700_000_104_321),  # past the last record + gap + lateness
        ("tumbling", 10_000, 10_000),  # no lateness
    ],
)
def test_aggregate_latency_counts_from_when_the_window_became_closable(
    kind: str, end_ms: int, closed_at_ms: int
) -> None:
    line = aggregate_converter()(
        message(
            aggregate_record(
                kind, 30_000, 30_000, end_ms - 10_000, end_ms, closed_at_ms=closed_at_ms
            )
        )
    )
    assert window_closable_ms(line) == closed_at_ms and window_end_ms(line) == end_ms


def test_a_tag_cannot_pass_for_the_window_end() -> None:
    thing = "x,window_end_ms=5i y,closed_at_ms=7i"
    line = aggregate_converter()(
        message(aggregate_record("tumbling", 10_000, 10_000, 0, 10_000, thing=thing))
    )
    assert window_end_ms(line) == window_closable_ms(line) == 10_000
    line = aggregate_converter()(
        message(
            aggregate_record(
                "tumbling", 10_000, 10_000, 0, 10_000, thing=thing, closed_at_ms=12_000
            )
        )
    )
    assert window_closable_ms(line) == 12_000


def test_only_raw_joined_and_aggregate_have_a_reference() -> None:
    references = latency_references()
    assert references == {
        "raw": point_time_ms,
        "joined": point_time_ms,
        "aggregate": window_closable_ms,
    }
    # a cycle of the operation statistics waits for its data by definition (its end and one
    # hold): a latency from it would measure the cycle, not the pipeline
    assert {kind.measurement for kind in KINDS.values()} - set(references) == {
        "late",
        "opstats",
        "overload",
        "dead_letter",
    }


def bucket(measurement: str, le: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "connector_event_latency_seconds_bucket", {"measurement": measurement, "le": le}
        )
        or 0.0
    )


def test_the_connector_observes_aggregates_from_their_window_end() -> None:
    """A window that ended 20 s ago, from records a minute old, closed by an idle flush (no
    closed_at_ms): 20 s, not a minute (nor the hour since the window started). The same window
    made closable by a record of 2 s ago: 2 s."""
    now_ms = int(time.time() * 1000)
    converters = {
        "raw-topic": (raw_converter(), "raw"),
        "agg-topic": (aggregate_converter(), "aggregate"),
        "late-topic": (lambda _m: "late,thing=T1 count=1i 0", "late"),
    }
    batch = Batch(generation=0)
    batch.add_chunk(
        [
            message(raw_record(now_ms - 2_000), "raw-topic"),
            message(
                aggregate_record(
                    "tumbling", 3_600_000, 3_600_000, now_ms - 3_620_000, now_ms - 20_000
                ),
                "agg-topic",
            ),
            message(
                aggregate_record(
                    "tumbling",
                    3_600_000,
                    3_600_000,
                    now_ms - 3_620_000,
                    now_ms - 20_000,
                    thing="T2",
                    closed_at_ms=now_ms - 2_000,
                ),
                "agg-topic",
            ),
            message(b"", "late-topic"),
        ],
        converters,
    )
    before = {
        (m, le): bucket(m, le)
        for m in ("raw", "aggregate", "late")
        for le in ("1.0", "3.0", "10.0", "30.0")
    }
    connector: Any = SimpleNamespace(converters=converters)  # all _observe_latency reads
    Connector._observe_latency(connector, batch)
    after = {key: bucket(*key) - count for key, count in before.items()}
    assert [after[("aggregate", le)] for le in ("1.0", "3.0", "10.0", "30.0")] == [0, 1, 1, 2]
    assert after[("raw", "1.0")] == 0 and after[("raw", "3.0")] == 1
    assert all(after[("late", le)] == 0 for le in ("1.0", "3.0", "10.0", "30.0"))
