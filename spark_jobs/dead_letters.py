"""Undecodable input records as dead letters, inside the jobs' one pass over their input.

A value spark-avro cannot decode becomes a row without a thing that keeps its Kafka key, value,
partition and offset. The stateful function hands such rows back as dead-letter rows without
touching any state, and the exactly-once sink writes them to the dead-letter topic in the
transaction of their batch. So a poison record is dead-lettered once and the query goes on;
before, it failed the query, and every restart failed again on the same record. A second
reader of the topic for the bad records alone would read every batch twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from spark_jobs.output_columns import Fields, OutputRows
from streamkit.wire import ADDED_LAST, schema_before
from streamkit.wire import dead_letters as wire_dead_letters
from streamkit.wire.registry import MAGIC

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

RECORD_TYPE = "dead_letter"
REASON = wire_dead_letters.UNDECODABLE

#: Input columns, null unless the record could not be decoded.
INPUT_COLUMNS = ("undecodable_key", "undecodable_value")
#: Output columns of a dead-letter row (filler in every other row).
OUTPUT_FIELDS: Fields = [
    ("undecodable_key", "binary"),
    ("undecodable_value", "binary"),
    ("source_partition", "long"),
    ("source_offset", "long"),
]


def decode(frame: DataFrame, schema: str, framed: bool = False, evolved: str = "") -> DataFrame:
    """Kafka records -> ``d`` (the decoded struct), the INPUT_COLUMNS and ``kafka_partition``,
    ``kafka_offset``. PERMISSIVE makes an undecodable value a struct of nulls; ``thing`` is
    never null in a datum of either input schema, so its null marks the record. ``framed``:
    values open with the schema registry's 5-byte header (streamkit.wire.registry), cut off
    before decoding; a value without its magic byte decodes to nothing, a dead letter.
    ``evolved``: the schema's name when records written before its last field was added
    (``streamkit.wire.ADDED_LAST``) are read too: with the older schema, that field taking its
    default, as Avro's schema resolution reads them."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    body = F.col("value")
    if framed:
        body = F.when(
            F.substring("value", 1, 1) == F.lit(bytes([MAGIC])), F.expr("substring(value, 6)")
        )
    current = from_avro(body, schema, {"mode": "PERMISSIVE"})
    if evolved:
        before = from_avro(body, schema_before(evolved), {"mode": "PERMISSIVE"})
        fields = {f["name"]: f.get("default") for f in json.loads(schema)["fields"]}
        added = ADDED_LAST[evolved]
        current = F.when(current["thing"].isNotNull(), current).otherwise(
            F.struct(
                *[
                    (F.lit(fields[name]) if name == added else before[name]).alias(name)
                    for name in fields
                ]
            )
        )
    decoded = frame.select(
        current.alias("d"),
        "key",
        "value",
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
    )
    bad = F.col("d").isNull() | F.col("d.thing").isNull()
    return decoded.select(
        "d",
        *[
            F.when(bad, F.col(raw)).alias(name)
            for raw, name in zip(("key", "value"), INPUT_COLUMNS, strict=False)
        ],
        "kafka_partition",
        "kafka_offset",
    )


def rows(fields: Fields, frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """The undecodable records (Spark's frames of the null-thing group) as output rows of the
    job's schema."""
    import pandas as pd

    batch = pd.concat(list(frames), ignore_index=True)
    out = OutputRows(fields)
    add_rows(
        out,
        batch["undecodable_key"].to_numpy(),
        batch["undecodable_value"].to_numpy(),
        batch["kafka_partition"].to_numpy(),
        batch["kafka_offset"].to_numpy(),
    )
    return out.frame()


def add_rows(out: OutputRows, keys: Any, values: Any, partitions: Any, offsets: Any) -> None:
    """Undecodable records (their Kafka key, value, partition and offset) as dead-letter rows."""
    out.add(
        len(values),
        record_type=RECORD_TYPE,
        undecodable_key=keys,
        undecodable_value=values,
        source_partition=partitions,
        source_offset=offsets,
    )


def route(
    columns: dict[str, Column],
    *,
    dlq_topic: str,
    dlq_partitions: int,
    source_topic: str,
    stage: str,
) -> list[Column]:
    """The sink's columns (topic, key, value, partition) with the dead-letter rows sent to the
    dead-letter topic as they came (key and value), plus ``headers`` with the reason and where
    the record was, as the bridge's and the connector's dead letters have them."""
    from pyspark.sql import functions as F

    is_dead = F.col("record_type") == RECORD_TYPE
    dead = {
        "topic": F.lit(dlq_topic),
        "key": F.col("undecodable_key"),
        "value": F.col("undecodable_value"),
        "partition": F.pmod(F.col("source_partition"), F.lit(dlq_partitions)).cast("int"),
    }
    headers = header_column(stage, source_topic)
    return [
        F.when(is_dead, dead[name]).otherwise(column).alias(name)
        for name, column in columns.items()
    ] + [F.when(is_dead, headers).alias("headers")]


def header_column(stage: str, source_topic: str) -> Column:
    """The wire contract's dead-letter headers (:func:`streamkit.wire.dead_letters.record_fields`)
    as Spark's ``array<struct<key, value>>`` column, with the stage instead of a detail
    (spark-avro gives no reason)."""
    from pyspark.sql import functions as F

    fields = wire_dead_letters.record_fields(
        F.lit(REASON),
        (wire_dead_letters.STAGE, F.lit(stage)),
        F.lit(source_topic),
        F.col("source_partition").cast("string"),
        F.col("source_offset").cast("string"),
        F.length(F.col("undecodable_value")).cast("string"),
    )
    return F.array(
        *[
            F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))
            for name, value in fields
        ]
    )
