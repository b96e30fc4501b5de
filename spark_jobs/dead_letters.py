"""Records of an input topic that are not a datum of its Avro schema become dead letters.

A Spark job must not fail on one bad record: a restart would read it again and fail again,
for ever (a live job that does nothing). So the input is decoded leniently, and each record
that does not decode becomes a row for the dead-letter topic, with the headers the bridge and
the connector use (``reason``, ``detail``, ``source``, ``source_partition``, ``source_offset``,
``payload_bytes``) and ``stage``. Those rows go out in the batch's own transaction, beside the
job's output: each bad record is dead-lettered exactly once, and then the job moves on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from streamkit.avro_codec import schema_text

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The sink's optional ``headers`` column (spark_jobs.eos_sink.arrow_rows).
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
REASON = "undecodable"


class Decoded(NamedTuple):
    records: "DataFrame"  # the decoded fields (``d.*``) and the columns asked for
    dead_letters: "DataFrame"  # topic, key, value, partition, headers


def _header(name: str, value: "Column") -> "Column":
    from pyspark.sql import functions as F

    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def decode_or_dead_letter(kafka: "DataFrame", schema: str, required_field: str, dlq_topic: str, stage: str,
                          *extra: "Column") -> Decoded:
    """``kafka``: a Kafka source frame. A record decodes when its value is a datum of ``schema``:
    Spark's lenient mode gives nulls for anything else, so a null ``required_field`` (never null
    in a datum) marks a record that did not decode, a missing value included."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    decoded = kafka.select(from_avro("value", schema_text(schema), {"mode": "PERMISSIVE"}).alias("d"),
                           "key", "value", "topic", "partition", "offset", *extra)
    ok = F.col(f"d.{required_field}").isNotNull()
    headers = F.array(
        _header("reason", F.lit(REASON)), _header("detail", F.lit(f"not an Avro {schema}")),
        _header("source", F.col("topic")), _header("source_partition", F.col("partition")),
        _header("source_offset", F.col("offset")),
        _header("payload_bytes", F.coalesce(F.length("value"), F.lit(0))), _header("stage", F.lit(stage)))
    dead = decoded.where(~ok).select(F.lit(dlq_topic).alias("topic"), "key", "value",
                                     F.lit(None).cast("int").alias("partition"), headers.alias("headers"))
    return Decoded(decoded.where(ok), dead)


def with_dead_letters(output: "DataFrame", dead_letters: "DataFrame") -> "DataFrame":
    """The job's Kafka records and the dead letters as one frame for the exactly-once sink."""
    from pyspark.sql import functions as F

    return output.withColumn("headers", F.lit(None).cast(HEADERS_TYPE)).unionByName(dead_letters)
