"""Spark reads Kafka offline through the resolved connector jars and decodes our Avro schema."""

from __future__ import annotations

import uuid

import pytest

from stacktools.stack.settings import Settings
from streamkit.kafka_clients import spark_kafka_options, transactional_producer
from streamkit.wire import AvroCodec, schema_text
from tests.support.server_checks import create_topic

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_spark_reads_committed_avro_records_from_kafka(stack_settings: Settings) -> None:
    from pyspark.sql.avro.functions import from_avro

    from spark_jobs.session import build_session

    topic = create_topic(stack_settings)
    codec = AvroCodec("measurement")
    records = [
        {
            "thing": "R0815",
            "quantity": "actSpeed_C11",
            "event_time_ms": 1_554_096_380_000 + i,
            "value": float(i),
            "row_id": str(uuid.uuid4()),
        }
        for i in range(20)
    ]
    producer = transactional_producer(stack_settings, f"spark-check-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    for record in records[:10]:
        producer.produce(topic, codec.encode(record), partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    for record in records[10:]:
        producer.produce(topic, codec.encode(record), partition=0)
    producer.abort_transaction()

    spark = build_session("connector-check")
    try:
        frame = (
            spark.read.format("kafka")
            .options(**spark_kafka_options(stack_settings))
            .option("subscribe", topic)
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
        rows = (
            frame.select(from_avro("value", schema_text("measurement")).alias("m"))
            .select("m.*")
            .collect()
        )
    finally:
        spark.stop()
    assert sorted((r.asDict() for r in rows), key=lambda r: r["event_time_ms"]) == records[:10]
