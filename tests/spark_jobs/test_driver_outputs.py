"""With the state in the driver the single pass encodes its outputs itself: every Kafka record
(topic, key, value, partition, headers) equals, byte for byte, what the Spark routes
(``spark_jobs.outputs``) build from the same output rows, registry header, the statistics'
encoded cycles and dead letters included."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from operators import Records
from operators.keyed import KeyedStates
from spark_jobs import dead_letters, outputs, passes, renderers, single_pass
from spark_jobs.config import SinglePassSettings
from spark_jobs.driver_outputs import SCHEMAS, KafkaOutputs
from spark_jobs.output_columns import OutputRows
from streamkit.wire.registry import frame
from tests.support.harness import bridge_rows
from tests.support.spark import REPO
from windowing import STAGE as WINDOW_STAGE

pytestmark = [pytest.mark.spark]

SAMPLE = REPO / "tests" / "data" / "test_events.json"
PAIRS = "actSpeed_*:vaTorque_*:mechanical_power,vaCurr_C11:vaLoad_C11:product"
TOPICS = {
    outputs.JOINED: "joined-t",
    outputs.AGGREGATE: "aggregates-t",
    outputs.LATE: "late-t",
    "opstats": "opstats-t",
    "overload": "overloads-t",
}
PARTITIONS = {outputs.JOINED: 3, outputs.AGGREGATE: 2, outputs.LATE: 5, "opstats": 4, "overload": 2}
HEADERS = {kind: frame(11 + n) for n, kind in enumerate(TOPICS)}
#: a rating the sample's spindle overloads, so that its alerts fire too
CATALOGUE = "defaults:\n  rated_power_kw: 0.05\n  duty_rating_pct: 5\n"


def stage_settings(catalogue: Path) -> SinglePassSettings:
    """Short cycles, so that the sample's 400 rows close some."""
    catalogue.write_text(CATALOGUE)
    return SinglePassSettings.from_sources(
        environ={},
        cli={
            "pairs": PAIRS,
            "idle_timeout": "30s",
            "max_future": "1h",
            "opstats_cycle": "20s",
            "machine_catalogue": str(catalogue),
        },
    )


DLQ, DLQ_PARTITIONS, RAW = "dlq-t", 3, "raw-t"


def rendered_outputs(settings: SinglePassSettings) -> OutputRows:
    """The sample's outputs as the driver renders them: pairs, windows (closed by the data and
    by the idle timeout), late records of both stages, and dead letters."""
    config = passes.join_plan(settings)
    table = KeyedStates(passes.thing_operator(settings, config))
    render = renderers.thing_rows(renderers.StatsRows(HEADERS["opstats"], b""))
    out = OutputRows(passes.output_fields(settings), renderers.NULLABLE)
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


def test_the_driver_writes_the_records_spark_writes(tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from spark_jobs.session import build_session

    settings = stage_settings(tmp_path / "catalogue.yaml")
    out = rendered_outputs(settings)
    kinds = {kind: out.count(kind) for kind in (*TOPICS, dead_letters.RECORD_TYPE)}
    assert all(kinds.values()), kinds
    mine = KafkaOutputs(
        TOPICS,
        PARTITIONS,
        {kind: HEADERS[kind] for kind in SCHEMAS},
        dlq_topic=DLQ,
        dlq_partitions=DLQ_PARTITIONS,
        source_topic=RAW,
        stage=single_pass.STAGE,
    ).rows(out)

    spark = build_session("driver-outputs-check")
    try:
        spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")  # as a state function
        schema = ", ".join(f"{n} {k}" for n, k in passes.output_fields(settings))
        rows = spark.createDataFrame(out.frame(), schema)
        routes = [
            outputs.joined_route(TOPICS["joined"], PARTITIONS["joined"], HEADERS["joined"]),
            outputs.aggregate_route(
                TOPICS["aggregate"], PARTITIONS["aggregate"], HEADERS["aggregate"]
            ),
            outputs.late_route(
                TOPICS["late"],
                PARTITIONS["late"],
                F.col("stage"),
                F.when(F.col("stage") == WINDOW_STAGE, F.col("watermark_ms")),
                header=HEADERS["late"],
            ),
            outputs.encoded_route("opstats", TOPICS["opstats"], PARTITIONS["opstats"]),
            outputs.encoded_route("overload", TOPICS["overload"], PARTITIONS["overload"]),
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
