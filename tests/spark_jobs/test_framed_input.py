"""The Spark jobs' reader with the schema registry on (spark_jobs.dead_letters.decode, framed):
the 5-byte header is cut off before spark-avro decodes; a value without the magic byte, or a
framed value that is not Avro of the schema, becomes a dead-letter row keeping its bytes."""

from __future__ import annotations

import pytest

from streamkit.wire import AvroCodec, schema_text
from streamkit.wire.registry import frame

pytestmark = [pytest.mark.spark]

RECORD = {
    "thing": "R0815",
    "quantity": "actSpeed_C11",
    "event_time_ms": 1_554_096_380_000,
    "value": 2.5,
    "row_id": "row-1",
}


def test_framed_values_decode_and_unframed_ones_are_dead_letters() -> None:
    from spark_jobs import dead_letters
    from spark_jobs.session import build_session

    body = AvroCodec("measurement").encode(RECORD)
    values = [
        frame(5) + body,  # as a producer writes it
        body,  # plain Avro: no magic byte
        b"\x01" + frame(5)[1:] + body,  # another magic byte
        frame(5) + b"\xff",  # framed, but no measurement
    ]
    spark = build_session("framed-input-check")
    try:
        frame_in = spark.createDataFrame(
            [(b"k", v, 0, i) for i, v in enumerate(values)],
            "key binary, value binary, partition int, offset long",
        )
        rows = (
            dead_letters.decode(frame_in, schema_text("measurement"), framed=True)
            .orderBy("kafka_offset")
            .collect()
        )
    finally:
        spark.stop()
    good, *bad = rows
    assert good["d"].asDict() == RECORD and good["undecodable_value"] is None
    assert [bytes(r["undecodable_value"]) for r in bad] == values[1:]
    assert all(r["d"] is None or r["d"]["thing"] is None for r in bad)
