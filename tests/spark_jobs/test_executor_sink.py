"""The executors' sink's task function on the real broker, without Spark: each output partition
of a batch is written once, a replayed task skips, and a stalled attempt of a partition is
fenced by its retry and writes nothing."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pyarrow as pa
import pytest

from spark_jobs.eos_sink import ArrowRows, ExactlyOnceSink, SinkError, read_marker
from spark_jobs.executor_sink import PartitionWriter, partition_query
from stacktools.stack.settings import Settings
from tests.support.spark import key_values, private_topic, read_to_end

pytestmark = [pytest.mark.stack]


def output(topic: str, batch: int, partition: int, n: int = 4, letters: int = 0) -> pa.Table:
    """A task's share of a batch: ``n`` rows, the last ``letters`` of them dead letters."""
    keys = [f"b{batch}-p{partition}-{i}".encode() for i in range(n)]
    headers = [
        [{"key": "reason", "value": b"undecodable"}] if i >= n - letters else None for i in range(n)
    ]
    return pa.table(
        {
            "topic": [topic] * n,
            "key": keys,
            "value": [k + b"-v" for k in keys],
            "partition": pa.array([partition] * n, pa.int32()),
            "headers": pa.array(
                headers, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
            ),
        }
    )


def writer(settings: Settings, query: str, markers: str, batch: int) -> PartitionWriter:
    return PartitionWriter(settings, query, markers, batch, "query-id-1", timedelta(seconds=20))


def test_each_partition_of_a_batch_is_written_once_and_a_zombie_attempt_is_fenced(
    stack_settings: Settings,
) -> None:
    out = private_topic(stack_settings, "joined", 2)
    markers = private_topic(stack_settings, "markers", 1, compact=True)
    query = f"exec-{uuid.uuid4().hex[:8]}"
    written: list[pa.Table] = []

    for partition in (0, 1):  # batch 0: both partitions, one with dead letters
        table = output(out, 0, partition, letters=partition)
        outcome, rows, letters = writer(stack_settings, query, markers, 0).write(partition, table)
        assert (outcome, rows, dict(letters)) == (
            "committed",
            4,
            {"undecodable": 1} if partition else {},
        )
        written.append(table)
    # the task of partition 1 replayed (a driver restart): skipped, nothing written
    assert writer(stack_settings, query, markers, 0).write(1, output(out, 0, 1))[0] == "skipped"

    # an attempt of partition 0 that opened for batch 1 and then stalled (an executor Spark
    # believes lost); its retry elsewhere fences it and commits batch 1
    zombie = ExactlyOnceSink(
        stack_settings,
        partition_query(query, 0),
        markers,
        transaction_timeout=timedelta(seconds=20),
    )
    zombie.open("query-id-1")
    table = output(out, 1, 0)
    assert writer(stack_settings, query, markers, 1).write(0, table)[0] == "committed"
    written.append(table)
    with pytest.raises(SinkError):
        zombie.write_batch(1, ArrowRows(output(out, 1, 0, n=3)), rows_hint=3)
    assert writer(stack_settings, query, markers, 1).write(0, output(out, 1, 0))[0] == "skipped"
    assert writer(stack_settings, query, markers, 2).write(1, output(out, 2, 1, n=0))[0] == "empty"

    assert key_values(read_to_end(stack_settings, out)) == Counter(
        (key, key + b"-v") for table in written for key in table.column("key").to_pylist()
    )
    markers_of = [read_marker(stack_settings, markers, partition_query(query, p)) for p in (0, 1)]
    assert [m.batch_id if m else None for m in markers_of] == [1, 0]
    assert read_marker(stack_settings, markers, query) is None, (
        "no marker under the query's own name"
    )
