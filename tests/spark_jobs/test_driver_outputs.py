"""With the state in the driver the single pass encodes its outputs itself: every Kafka record
(topic, key, value, partition, headers) equals, byte for byte, what the Spark routes
(``spark_jobs.outputs``) build from the same output rows, registry header and dead letters
included."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

from operators import Records
from operators.keyed import KeyedStates
from spark_jobs import aggregate, dead_letters, join, outputs, single_pass
from spark_jobs.config import SinglePassSettings
from spark_jobs.driver_outputs import KafkaOutputs
from spark_jobs.output_columns import OutputRows
from streamkit.wire.registry import frame
from tests.support.harness import bridge_rows
from tests.support.spark import REPO

pytestmark = [pytest.mark.spark]

SAMPLE = REPO / "tests" / "data" / "test_events.json"
PAIRS = "actSpeed_*:vaTorque_*:mechanical_power,vaCurr_C11:vaLoad_C11:product"
TOPICS = {outputs.JOINED: "joined-t", outputs.AGGREGATE: "aggregates-t", outputs.LATE: "late-t"}
PARTITIONS = {outputs.JOINED: 3, outputs.AGGREGATE: 2, outputs.LATE: 5}
HEADERS = {kind: frame(11 + n) for n, kind in enumerate(TOPICS)}
DLQ, DLQ_PARTITIONS, RAW = "dlq-t", 3, "raw-t"


def rendered_outputs() -> OutputRows:
    """The sample's outputs as the driver renders them: pairs, windows (closed by the data and
    by the idle timeout), late records of both stages, and dead letters."""
    settings = SinglePassSettings.from_sources(
        # the statistics' cycles are no flat record: tests/spark_jobs/test_operation_stats.py
        environ={},
        cli={"pairs": PAIRS, "idle_timeout": "30s", "max_future": "1h", "opstats_power": ""},
    )
    config = join.join_plan(settings)
    table = KeyedStates(single_pass.thing_operator(settings, config))
    render = single_pass.ThingRows(join.JoinRows())
    out = OutputRows(single_pass.OUTPUT_FIELDS, aggregate.NULLABLE)
    rows = list(bridge_rows(SAMPLE))[:400]
    now = int(time.time() * 1000)
    by_thing: dict[str, list[tuple]] = {}
    for row in rows + rows[-30:]:  # the last rows re-sent: late records of both stages
        for quantity, value in row.quantities.items():
            record = (quantity, row.timestamp_ms, value, row.row_id)
            by_thing.setdefault(row.thing, []).append(record)
    ahead = next(iter(by_thing))
    by_thing[ahead].append(("actSpeed_C11", now + 7_200_000, 1.0, "bad-clock"))  # future
    batches = [(t, Records.of(*zip(*r, strict=True))) for t, r in sorted(by_thing.items())]
    for step in (table.step(batches, now), table.step([], now + 3_600_000)):  # then idle
        for key, batch, emitted in step.emitted:
            render(out, (key,), batch, emitted, {})
    dead_letters.add_rows(
        out,
        np.array([b"k1", None], dtype=object),
        np.array([b"\xff not avro", None], dtype=object),
        np.array([1, 0]),
        np.array([17, 18]),
    )
    return out


def test_the_driver_writes_the_records_spark_writes() -> None:
    from pyspark.sql import functions as F

    from spark_jobs.session import build_session

    out = rendered_outputs()
    kinds = {kind: out.count(kind) for kind in (*TOPICS, dead_letters.RECORD_TYPE)}
    assert all(kinds.values()), kinds
    mine = KafkaOutputs(
        TOPICS,
        PARTITIONS,
        HEADERS,
        dlq_topic=DLQ,
        dlq_partitions=DLQ_PARTITIONS,
        source_topic=RAW,
        stage=single_pass.STAGE,
    ).rows(out)

    spark = build_session("driver-outputs-check")
    try:
        spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")  # as a state function
        rows = spark.createDataFrame(out.frame(), single_pass.OUTPUT_SCHEMA)
        routes = [
            outputs.joined_route(TOPICS["joined"], PARTITIONS["joined"], HEADERS["joined"]),
            outputs.aggregate_route(
                TOPICS["aggregate"], PARTITIONS["aggregate"], HEADERS["aggregate"]
            ),
            outputs.late_route(
                TOPICS["late"],
                PARTITIONS["late"],
                F.col("stage"),
                F.when(F.col("stage") == aggregate.STAGE, F.col("watermark_ms")),
                header=HEADERS["late"],
            ),
        ]
        theirs = outputs.to_kafka_records(
            rows,
            routes,
            dlq_topic=DLQ,
            dlq_partitions=DLQ_PARTITIONS,
            source_topic=RAW,
            stage=single_pass.STAGE,
        ).collect()
    finally:
        spark.stop()

    def plain(topic, key, value, partition, headers) -> tuple:
        named = None if headers is None else tuple((h[0], h[1] and bytes(h[1])) for h in headers)
        return topic, key and bytes(key), value and bytes(value), partition, named

    spark_records = Counter(
        plain(r["topic"], r["key"], r["value"], r["partition"], r["headers"]) for r in theirs
    )
    assert Counter(plain(*r) for r in mine) == spark_records
    assert len(mine) == sum(kinds.values())
