"""With the schema registry on, a standard registry-aware client decodes every data topic.

The sample runs through the whole pipeline (bridge -> single pass -> connector) with
SCHEMA_REGISTRY on; then each of raw, joined, aggregates and late is read back and decoded twice:
by confluent-kafka's AvroDeserializer, which knows nothing of this project but the registry's URL
and CA, and by the pipeline's own reader (header cut off, the project's schema). Both must give
the same records, every value carrying the id registered under ``<topic>-value``; and the
connector, reading the same framing, must have written every record into InfluxDB.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from stacktools.harness.pipeline import Pipeline
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end
from streamkit.wire import AvroCodec
from streamkit.wire.registry import RegistryClient, subject, unframe
from tests.end_to_end.test_pipeline_to_influx import recent_events, wait_for_input_rows
from tests.support.harness import expected_records, quick_single_pass_args, wait_for_keys
from tests.support.influx_checks import point_count
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.spark]

#: kind -> (schema, InfluxDB measurement; None: not counted, late points of one key collapse)
KINDS = {
    "raw": ("measurement", "raw"),
    "joined": ("joined", "joined"),
    "aggregates": ("aggregate", "aggregate"),
    "late": ("late", None),
}


def test_a_registry_aware_client_decodes_every_topic(
    stack_settings: Settings, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    settings = dataclasses.replace(stack_settings, schema_registry=True)
    registry = Stack(settings, ["schema-registry"])
    started = registry.groups_not_running()
    registry.up()
    events = recent_events(tmp_path / "events.json", int(time.time() * 1000))
    wiring = Wiring.private(settings)
    topics = wiring.connector_topics
    pipeline = Pipeline(
        settings,
        wiring,
        tmp_path / "run",
        extra_args=quick_single_pass_args(),
    )
    try:
        pipeline.start_stages()
        pipeline.wait_bridges()
        sim = pipeline.replay(events, "--order", "file", "--rate", "1000")
        assert sim.popen.wait(300) == 0, pipeline.log("simulator").read_text()[-2000:]
        expected_raw = expected_records(events)
        assert set(expected_raw) <= wait_for_keys(settings, topics["raw"], set(expected_raw), 120)
        raw_count = len(read_to_end(settings, topics["raw"]))
        wait_for_input_rows(
            pipeline.log("spark_single_pass"),
            raw_count,
            pipeline.services["spark_single_pass"],
            600,
            then_idle=True,
        )

        standard_client = SchemaRegistryClient(
            {"url": settings.registry_url, "ssl.ca.location": str(settings.ca_path)}
        )
        deserialize = AvroDeserializer(standard_client)
        ours = RegistryClient(settings)
        counts = {}
        for kind, (schema, _measurement) in KINDS.items():
            topic = topics[kind]
            messages = read_to_end(settings, topic)
            assert messages, f"nothing in {kind}"
            status, latest = ours.call("GET", f"/subjects/{subject(topic)}/versions/latest")
            assert status == 200, latest
            codec = AvroCodec(schema)
            pipeline_view, standard_view = [], []
            for message in messages:
                value = message.value()
                assert value is not None
                schema_id, body = unframe(value)
                assert schema_id == latest["id"], (kind, schema_id, latest)
                pipeline_view.append(codec.decode(body))
                standard_view.append(
                    deserialize(value, SerializationContext(topic, MessageField.VALUE))
                )
            assert standard_view == pipeline_view, kind
            counts[kind] = len(messages)
        for kind, (_schema, measurement) in KINDS.items():
            if measurement is None:
                continue

            def landed(measurement: str = measurement, records: int = counts[kind]) -> bool:
                return point_count(settings, wiring.database, measurement) == records

            settle(landed, 120, f"the connector's {measurement} points")
            assert landed(), (kind, point_count(settings, wiring.database, measurement))
        print(counts)
    finally:
        codes = pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
        if started:
            registry.down()
    assert all(code == 0 for code in codes.values()), codes
