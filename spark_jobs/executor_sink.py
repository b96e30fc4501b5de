"""Exactly-once Kafka output written by the executors: one transaction per output partition
and batch.

The driver-side sink (``eos_sink.ExactlyOnceSink``) collects each batch to the driver and
writes it through one producer: the one part of a job that does not grow with a cluster. Here
``foreachBatch`` only plans: the batch's output rows are hash-partitioned by key into a fixed
number of output partitions (``SPARK_SINK_PARTITIONS``), and each task writes its partition
with the same protocol as the driver-side sink, under names of its own:

* ``transactional.id`` ``<Kafka user>.eos-<query>-p<N>`` and marker key ``<query>-p<N>`` (N: the
  output partition), both stable across restarts, task retries and executors;
* a task opens (``init_transactions``: fences any earlier holder of the id, a zombie task or a
  dead executor's, and aborts its open transaction), reads the partition's marker, skips a batch
  the marker shows committed, and otherwise puts its rows and the marker for this batch into one
  transaction and commits;
* two attempts of one partition at once (a speculative copy, a task Spark believed lost) fence
  each other: the later one to open wins, the earlier one's commit fails; whichever commits
  first, the marker makes the other skip, so each batch is written at most once per partition.

The driver receives a row of counts per partition, not the output. Guarantees and their price
(docs/exactly-once.md): a batch becomes visible partition by partition (a reader may see
partition 0 of batch N before partition 1 of it); the output partition count is part of the
query's identity: change it only for a fresh checkpoint or after a clean stop (every batch
committed in every partition), as markers of the old count no longer cover the new partitions.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from spark_jobs.eos_sink import (
    DEAD_LETTERS,
    EMPTY,
    LAST_BATCH,
    PHASE_SECONDS,
    RECORDS,
    SKIPPED,
    TRANSACTIONS,
    ArrowRows,
    ExactlyOnceSink,
    FaultHook,
    SinkError,
)
from streamkit.config import KafkaSettings
from streamkit.logs import setup_logging

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger("spark_jobs.executor_sink")

#: What each task reports to the driver (dead letters: a JSON object of counts by reason).
RESULT_SCHEMA = "partition int, outcome string, rows long, dead_letters string"


def partition_query(query_name: str, partition: int) -> str:
    """The name of one output partition of a query: its marker key; ``<Kafka user>.eos-`` + it
    is its transactional id (:func:`streamkit.kafka_clients.owned_name`)."""
    return f"{query_name}-p{partition}"


def _worker_logging() -> None:
    """The task's sink's warnings and errors as JSON on the executor's stderr (in local mode the
    job's own log); its per-batch INFO lines would repeat the driver's."""
    if not logging.getLogger().handlers:
        setup_logging("WARNING")


@dataclass(frozen=True)
class PartitionWriter:
    """The task's function (``mapInArrow``): writes its output partition of one batch exactly
    once. Picklable: it travels to the executors with the batch's plan."""

    settings: KafkaSettings
    query_name: str
    marker_topic: str
    batch_id: int
    query_id: str | None
    transaction_timeout: timedelta
    fault_hook: FaultHook | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("a partition writer runs only inside a Spark task")
        partition = context.partitionId()
        received = list(batches)
        table = (
            pa.Table.from_batches(received)
            if received
            else pa.table({"key": pa.array([], pa.binary())})
        )
        outcome, rows, letters = self.write(partition, table)
        yield pa.RecordBatch.from_pydict(
            {
                "partition": [partition],
                "outcome": [outcome],
                "rows": [rows],
                "dead_letters": [json.dumps(letters)],
            },
            schema=pa.schema(
                [
                    ("partition", pa.int32()),
                    ("outcome", pa.string()),
                    ("rows", pa.int64()),
                    ("dead_letters", pa.string()),
                ]
            ),
        )

    def write(self, partition: int, table: pa.Table) -> tuple[str, int, collections.Counter]:
        """The outcome (committed, skipped or empty), rows and dead letters written. A producer
        per task: one kept in a Python worker for the next batch was fenced whenever the
        partition's next task ran in another worker (PySpark picks any idle one), which wasted a
        whole produce (benchmarks/experiments/bench_sinks.py). A second try when this one's
        producer is fenced by a concurrent attempt of the same partition (or fails otherwise): it
        fences that one in turn and reads the marker again; SinkError if it fails too (Spark
        retries the task)."""
        _worker_logging()
        name = partition_query(self.query_name, partition)
        hook = None if self.fault_hook is None else _PartitionHook(self.fault_hook, partition)
        for attempt in (1, 2):
            sink = ExactlyOnceSink(
                self.settings,
                name,
                self.marker_topic,
                transaction_timeout=self.transaction_timeout,
                fault_hook=hook,
            )
            try:
                sink.open(self.query_id)
                outcome = sink.write_batch(
                    self.batch_id,
                    ArrowRows(table),
                    rows_hint=table.num_rows,
                    query_id=self.query_id,
                )
                return (
                    (outcome, *sink.last_written)
                    if outcome == "committed"
                    else (outcome, 0, collections.Counter())
                )
            except (SinkError, KafkaException):
                if attempt == 2:
                    raise
            finally:
                sink.close()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class _PartitionHook:
    """The fault hook at a task's points, named ``<point>@<output partition>`` (the driver's own
    points, before_tasks and after_tasks, have no suffix)."""

    hook: FaultHook
    partition: int

    def __call__(self, point: str, batch_id: int) -> None:
        self.hook(f"{point}@{self.partition}", batch_id)


class ExecutorSink:
    """Callable for ``writeStream.foreachBatch``: the batch's output partitions written by the
    executors, each in its own transaction (module docstring)."""

    def __init__(
        self,
        settings: KafkaSettings,
        query_name: str,
        marker_topic: str,
        partitions: int,
        *,
        transaction_timeout: timedelta = timedelta(minutes=1),
        fault_hook: FaultHook | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError("an executor sink needs at least one output partition")
        self.settings, self.query_name, self.marker_topic = settings, query_name, marker_topic
        self.partitions = partitions
        self.transaction_timeout = transaction_timeout
        self.fault_hook = fault_hook
        self._last_committed = -1
        self._committed = TRANSACTIONS.labels(query_name, "committed")

    @property
    def last_committed(self) -> int:
        """The last batch whose every output partition is committed, as far as this driver saw."""
        return self._last_committed

    def prepare(self) -> None:
        """Nothing to do ahead: each task fences and reads its own marker."""

    def close(self) -> None:
        """Nothing to close here: each task closes its own producer."""

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        self._fault("before_tasks", batch_id)
        writer = PartitionWriter(
            self.settings,
            self.query_name,
            self.marker_topic,
            batch_id,
            query_id,
            self.transaction_timeout,
            self.fault_hook,
        )
        started = time.perf_counter()
        results = (
            batch_df.repartition(self.partitions, "key").mapInArrow(writer, RESULT_SCHEMA).collect()
        )
        seconds = time.perf_counter() - started
        PHASE_SECONDS.labels(self.query_name, "tasks").observe(seconds)
        if sorted(r.partition for r in results) != list(range(self.partitions)):
            raise SinkError(
                f"batch {batch_id}: results of partitions {sorted(r.partition for r in results)}, "
                f"expected 0..{self.partitions - 1}"
            )
        outcomes = collections.Counter(r.outcome for r in results)
        rows = sum(r.rows for r in results)
        self._committed.inc(outcomes["committed"])
        SKIPPED.labels(self.query_name).inc(outcomes["skipped"])
        EMPTY.labels(self.query_name).inc(outcomes["empty"])
        RECORDS.labels(self.query_name).inc(rows)
        for result in results:
            for reason, count in json.loads(result.dead_letters).items():
                DEAD_LETTERS.labels(self.query_name, reason).inc(count)
        self._last_committed = batch_id
        LAST_BATCH.labels(self.query_name).set(batch_id)
        log.info(
            "batch committed",
            extra={
                "query": self.query_name,
                "batch_id": batch_id,
                "rows": rows,
                "partitions": dict(outcomes),
                "seconds": round(seconds, 4),
            },
        )
        self._fault("after_tasks", batch_id)

    def _fault(self, point: str, batch_id: int) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point, batch_id)
