"""The shared helper package's pure parts: Avro codec, structured logs, CLI/env config."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import fastavro
import pytest

from stacktools.stack.settings import Settings
from streamkit.logs import JsonFormatter
from streamkit.shutdown import ShutdownFlag
from streamkit.wire import AvroCodec, schema_text


def test_measurement_round_trip_and_schema_fields() -> None:
    codec = AvroCodec("measurement")
    record = {
        "thing": "R0815",
        "quantity": "actSpeed_C11",
        "event_time_ms": 1_546_300_800_123,
        "value": 1234.5,
        "row_id": "3f1c-uuid",
    }
    payload = codec.encode(record)
    assert codec.decode(payload) == record
    # deterministic bytes: the buffer is reused, not appended to
    assert codec.encode(record) == payload
    assert [f["name"] for f in json.loads(schema_text("measurement"))["fields"]] == [
        "thing",
        "quantity",
        "event_time_ms",
        "value",
        "row_id",
    ]


def test_codec_refuses_records_that_do_not_fit_the_schema() -> None:
    codec = AvroCodec("measurement")
    with pytest.raises((ValueError, TypeError, fastavro.validation.ValidationError)):
        codec.encode(
            {
                "thing": "R0815",
                "quantity": "q",
                "event_time_ms": "not a number",
                "value": 1.0,
                "row_id": "x",
            }
        )
    nan = codec.decode(
        codec.encode(
            {"thing": "t", "quantity": "q", "event_time_ms": 0, "value": math.nan, "row_id": ""}
        )
    )
    assert math.isnan(nan["value"])  # the codec carries NaN; rejecting it is the bridge's job


def test_json_logs_keep_extra_fields() -> None:
    record = logging.makeLogRecord(
        {"name": "svc", "levelname": "INFO", "msg": "batch %d", "args": (7,), "rows": 42}
    )
    line = json.loads(JsonFormatter().format(record))
    assert (
        line["msg"] == "batch 7"
        and line["rows"] == 42
        and line["level"] == "INFO"
        and line["ts"].endswith("Z")
    )


def test_shutdown_flag_wakes_waiters() -> None:
    flag = ShutdownFlag()
    assert not flag.wait(0.01)
    flag.request()
    assert flag.requested and flag.wait(0.01)


def test_every_setting_has_a_cli_option_and_env_var_in_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stacktools.stack.topics", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    for env in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "MQTT_PASSWORD",
        "INFLUX_DATABASE",
        "TOPIC_PARTITIONS",
        "STACK_RUN_DIR",
    ):
        assert env in result.stdout


def test_cli_overrides_env_file(tmp_path: Path) -> None:
    (tmp_path / "credentials.env").write_text("MQTT_USERNAME=from-file\n")
    settings, _ = Settings.parse(["--run-dir", str(tmp_path), "--mqtt-port", "2883"])
    assert settings.mqtt_port == 2883 and settings.mqtt_username == "from-file"


def test_fast_measurement_encoder_is_byte_identical_to_fastavro() -> None:
    from hypothesis import given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    from streamkit.wire import MeasurementEncoder

    reference = AvroCodec("measurement")
    encoder = MeasurementEncoder()

    @hsettings(max_examples=300, deadline=None)
    @given(
        st.text(min_size=1),
        st.text(),
        st.integers(-(2**62), 2**62),
        st.dictionaries(st.text(min_size=1), st.floats(allow_nan=False), min_size=1, max_size=5),
    )
    def check(thing: str, row_id: str, time_ms: int, quantities: dict[str, float]) -> None:
        for quantity, payload in encoder.encode_row(thing, row_id, time_ms, quantities):
            expected = {
                "thing": thing,
                "quantity": quantity,
                "event_time_ms": time_ms,
                "value": quantities[quantity],
                "row_id": row_id,
            }
            assert payload == reference.encode(expected)

    check()


@pytest.mark.parametrize(
    "module",
    [
        "simulator",
        "simulator.generate",
        "mqtt_bridge",
        "stacktools.stack",
        "stacktools.stack.topics",
    ],
)
def test_every_service_has_help(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "usage:" in result.stdout, result.stderr


def test_flat_record_encoder_matches_fastavro_for_joined_pairs() -> None:
    from hypothesis import given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    from tests.support.avro import FlatRecordEncoder

    reference = AvroCodec("joined")
    encoder = FlatRecordEncoder("joined")
    longs, doubles, texts = st.integers(-(2**62), 2**62), st.floats(allow_nan=False), st.text()
    record = st.fixed_dictionaries(
        {
            "id": texts,
            "thing": texts,
            "left_quantity": texts,
            "right_quantity": texts,
            "left_time_ms": longs,
            "right_time_ms": longs,
            "left_value": doubles,
            "right_value": doubles,
            "result_name": texts,
            "result": doubles,
            "event_time_ms": longs,
            "component": texts,
        }
    )

    @hsettings(max_examples=200, deadline=None)
    @given(st.lists(record, min_size=1, max_size=5))
    def check(records: list[dict]) -> None:
        rows = [tuple(r[name] for name in encoder.field_names) for r in records]
        expected = [reference.encode(r) for r in records]
        assert [encoder.encode(row) for row in rows] == expected

    check()


def test_flat_record_encoder_handles_optional_fields() -> None:
    from tests.support.avro import FlatRecordEncoder

    reference, encoder = AvroCodec("late"), FlatRecordEncoder("late")
    for watermark in (None, 1_554_000_000_000):
        record = {
            "thing": "T",
            "quantity": "q",
            "event_time_ms": 5,
            "value": 1.5,
            "row_id": "r",
            "reason": "late",
            "stage": "join",
            "watermark_ms": watermark,
        }
        assert encoder.encode([record[n] for n in encoder.field_names]) == reference.encode(record)
