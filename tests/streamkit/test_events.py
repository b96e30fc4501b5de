"""Row parsing: the one documented timestamp rule and every kind of bad input."""

from __future__ import annotations

import pytest

from streamkit.events import (
    MAX_TIME_MS,
    MIN_TIME_MS,
    RowError,
    check_event_time,
    parse_row,
    timestamp_to_ms,
)

MS = 1_554_096_380_468  # 2019-04-01T05:26:20.468Z


@pytest.mark.parametrize(
    "raw, expected",
    [
        (MS, MS),  # milliseconds
        (MS // 1000, MS // 1000 * 1000),  # seconds
        (MS / 1000, MS),  # fractional seconds
        (MS * 1000 + 123, MS),  # microseconds
        (MS * 1_000_000 + 999, MS),  # nanoseconds
        (str(MS), MS),  # digits in a string
        ("2019-04-01T05:26:20.468Z", MS),  # ISO-8601 with Z
        ("2019-04-01T07:26:20.468+02:00", MS),  # with an offset
        ("2019-04-01T05:26:20.468", MS),  # naive = UTC
    ],
)
def test_timestamp_rule(raw: object, expected: int) -> None:
    assert timestamp_to_ms(raw) == expected


def test_a_good_row_and_python_dict_style() -> None:
    row = parse_row(
        b'{"Thing": "R0815", "Timestamp": 1554096380468, "actSpeed_C11": 12, "id": "u1"}'
    )
    assert (row.thing, row.timestamp_ms, row.row_id, row.quantities) == (
        "R0815",
        MS,
        "u1",
        {"actSpeed_C11": 12.0},
    )
    same = parse_row(
        "{'Thing': 'R0815', 'Timestamp': 1554096380468, 'actSpeed_C11': 12, 'id': 'u1'}"
    )
    assert same == row


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"\xff\xfe garbage", "not_utf8"),
        (b'{"Thing": "R0815", "Timest', "not_json"),
        (b"[1, 2, 3]", "not_object"),
        (b'{"Timestamp": 1, "a": 1}', "missing_thing"),
        (b'{"Thing": "", "Timestamp": 1, "a": 1}', "bad_thing"),
        (b'{"Thing": 5, "Timestamp": 1, "a": 1}', "bad_thing"),
        (b'{"Thing": "T", "a": 1}', "missing_timestamp"),
        (b'{"Thing": "T", "Timestamp": "yesterday", "a": 1}', "bad_timestamp"),
        (b'{"Thing": "T", "Timestamp": true, "a": 1}', "bad_timestamp"),
        (b'{"Thing": "T", "Timestamp": 1, "a": "fast"}', "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": 1, "a": true}', "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": 1, "a": NaN}', "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": 1, "a": Infinity}', "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": 1, "a": null}', "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": 1, "a|b": 1}', "bad_quantity_name"),
        (b'{"Thing": "T", "Timestamp": 1, "id": "x"}', "no_quantities"),
        (b"{'Thing': 'T', 'Timestamp': __import__('os')}", "not_json"),
        # Inputs that used to raise something other than RowError (and so escaped the bridge's
        # MQTT callback): each is now a dead letter with its own reason.
        (b"[" * 50_000, "too_deep"),
        (b'{"a": ' * 20_000, "too_deep"),
        (b'{"Thing": "T", "Timestamp": 1, "a": ' + b"1" * 5_000 + b"}", "bad_number"),
        (b'{"Thing": "T", "Timestamp": 1, "a": ' + b"9" * 400 + b"}", "bad_quantity"),
        (b'{"Thing": "T", "Timestamp": "' + b"1" * 5_000 + b'", "a": 1}', "bad_timestamp"),
        ('{"Thing": "T", "Timestamp": "\u00b2", "a": 1}'.encode(), "bad_timestamp"),
        (b"{'Thing': 'T', 'Timestamp': 1, 1: 2}", "bad_quantity_name"),
        (b"{'Thing': 'T', 'Timestamp': 1, (1, 2): 2}", "bad_quantity_name"),
        (b"{'Thing': 'T', 'Timestamp': 1, b'a': 2}", "bad_quantity_name"),
        (b'{"Thing": "T\\ud800", "Timestamp": 1, "a": 1}', "bad_thing"),
        (b'{"Thing": "T", "Timestamp": 1, "id": "\\udfff", "a": 1}', "not_utf8"),
    ],
)
def test_bad_rows_are_rejected_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(RowError) as caught:
        parse_row(payload)
    assert caught.value.reason == reason


NOW_MS = 1_790_000_000_000
HOUR_MS = 3_600_000


@pytest.mark.parametrize(
    "timestamp_ms", [NOW_MS, NOW_MS + HOUR_MS, 0, MIN_TIME_MS, 1_554_096_380_468]
)
def test_trusted_clocks_pass(timestamp_ms: int) -> None:
    check_event_time(timestamp_ms, NOW_MS, HOUR_MS)


@pytest.mark.parametrize(
    "payload,reason",
    [
        (b'{"Thing": "T", "Timestamp": %d, "q": 1}' % (NOW_MS + HOUR_MS + 1), "future_timestamp"),
        (
            b'{"Thing": "T", "Timestamp": %d, "q": 1}' % (NOW_MS + 10 * 365 * 24 * HOUR_MS),
            "future_timestamp",
        ),
        # seconds: the year 5138
        (b'{"Thing": "T", "Timestamp": 99999999999, "q": 1}', "timestamp_out_of_range"),
        (b'{"Thing": "T", "Timestamp": "9999-12-31T23:59:59", "q": 1}', "timestamp_out_of_range"),
        (b'{"Thing": "T", "Timestamp": "0001-01-01T00:00:00", "q": 1}', "timestamp_out_of_range"),
        (b'{"Thing": "T", "Timestamp": -99999999999999999999, "q": 1}', "timestamp_out_of_range"),
        (b'{"Thing": "T", "Timestamp": 1e30, "q": 1}', "timestamp_out_of_range"),
    ],
)
def test_untrusted_clocks_are_refused_with_a_reason(payload: bytes, reason: str) -> None:
    """Out of what InfluxDB (and an Avro long of ms) can hold first, then ahead of our clock."""
    row = parse_row(payload)
    with pytest.raises(RowError) as refused:
        check_event_time(row.timestamp_ms, NOW_MS, HOUR_MS)
    assert refused.value.reason == reason
    assert MAX_TIME_MS * 1_000_000 < 2**63 and MIN_TIME_MS * 1_000_000 >= -(2**63) + 2


def test_a_fractional_timestamp_is_floored_as_written_not_as_its_binary_neighbour() -> None:
    """543635725.874 s is the double 543635725.87399995...: float arithmetic made it ...873 ms
    (one such time in a hundred was a millisecond early; found by the independent row oracle)."""
    assert timestamp_to_ms(543635725.874) == 543_635_725_874
    assert (
        parse_row('{"Thing": "T", "Timestamp": 1088704048.995, "q": 1}').timestamp_ms
        == 1_088_704_048_995
    )
    assert timestamp_to_ms(-1.0005) == -1001  # floored: toward negative infinity
