"""The single pass with every thing's state in the driver (``SPARK_STATE=driver``).

Spark's stateful operator runs the thing's operator through a shuffle, a Python worker, Arrow
and pandas per key, and a state store per partition: a fixed cost per batch that dominates on
one machine. Here Spark reads and decodes the raw topic (in the JVM, on its executors), the
batch comes to the driver as Arrow, one :class:`~operators.keyed.KeyedStates` table runs the
operator for every thing, and the driver encodes and produces the outputs in the batch's
transaction. It is the local shape's: the state must fit in the driver's memory.

Exactly once, as with Spark's state store, by the sink's marker (``spark_jobs.eos_sink``):

* Before a batch's transaction commits, the table after the batch is written to
  ``<checkpoint>/driver-state/<batch id>`` (written whole, synced, then renamed), so the file
  of every committed batch exists.
* Every batch that moved state commits, with or without output rows, so the marker names the
  last batch that moved state. A batch that moved nothing (no records, no timer due) commits
  nothing: the table after it is the table after the marker's batch.
* At the first batch, and after any failure (operators update states in place: a batch that
  did not commit leaves the table untrusted), the table is the marker's batch's file; a replay
  of a committed batch is skipped as before. Spark replays a batch with the same offsets and the
  same batch time (``current_timestamp()`` is the batch's, kept in the offset log), so a batch
  computed again yields the same table and rows.

Timers (the windows' idle flush) need batches when no record comes: a rate source adds a
heartbeat row every second to the input, which makes Spark run a batch; heartbeat rows are no
records. The Kafka source alone runs no batch without new data.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import Gauge

from operators import Records
from operators.keyed import KeyedStates
from spark_jobs import dead_letters
from spark_jobs.driver_outputs import KafkaOutputs
from spark_jobs.eos_sink import ExactlyOnceSink
from spark_jobs.output_columns import Fields, OutputRows
from spark_jobs.stateful import Render
from streamkit.paths import private_directory, private_file

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.driver_state")

#: The batch's processing time, added to every input row (the same value in each).
BATCH_TIME = "batch_time_ms"
#: The checkpoint's subdirectory of the table's files.
STATE_DIR = "driver-state"

STATE_KEYS = Gauge("driver_state_keys", "keys whose state the driver holds", ["query"])
STATE_BYTES = Gauge(
    "driver_state_bytes", "size of the driver's state as last written to its file", ["query"]
)


class DriverStateMissing(RuntimeError):
    """The marker names a batch whose state file is not in the checkpoint."""


class StateFiles:
    """One file per batch that committed state, in the query's checkpoint."""

    def __init__(self, checkpoint: Path) -> None:
        self.directory = private_directory(checkpoint / STATE_DIR)

    def path(self, batch_id: int) -> Path:
        return self.directory / f"{batch_id}.kos"

    def write(self, batch_id: int, data: bytes) -> None:
        """Whole and durable before the batch's commit: a temporary file synced, renamed, and
        the directory synced."""
        temporary = self.directory / f".{batch_id}.kos.tmp"
        with private_file(temporary) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path(batch_id))
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def read(self, batch_id: int) -> bytes:
        try:
            return self.path(batch_id).read_bytes()
        except FileNotFoundError:
            raise DriverStateMissing(
                f"the commit marker names batch {batch_id}, and {self.path(batch_id)} is "
                "missing: the checkpoint holds Spark's state store (go on with "
                "SPARK_STATE=executors) or was changed by hand (start on a fresh checkpoint and "
                "query name)"
            ) from None

    def prune(self, committed: int) -> None:
        """Files of batches before the last committed one: never read again."""
        for path in self.directory.glob("*.kos"):
            if path.stem.isdigit() and int(path.stem) < committed:
                path.unlink(missing_ok=True)


def split_batch(table: pa.Table) -> tuple[list[tuple[str, Records]], Any, int | None]:
    """A batch's Arrow rows -> each thing's records in arrival order (things sorted), the
    undecodable rows (an Arrow table, or None) and the batch time (None: no row at all).
    Heartbeat rows (no Kafka partition) are left out."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return [], None, None
    now = int(table.column(BATCH_TIME)[0].as_py())
    from_kafka = pc.is_valid(table.column("kafka_partition"))
    decoded = pc.is_valid(table.column("thing"))
    undecodable = table.filter(pc.and_(from_kafka, pc.invert(decoded)))
    records = table.filter(pc.and_(from_kafka, decoded))
    if records.num_rows == 0:
        return [], (undecodable if undecodable.num_rows else None), now
    things = records.column("thing").combine_chunks().dictionary_encode()
    names = things.dictionary.to_pylist()
    # the dictionary is in first-seen order: rank it so that things run sorted
    rank = np.argsort(np.argsort(np.array(names, dtype=object)))
    codes = rank[things.indices.to_numpy()]
    order = np.lexsort(
        (
            records.column("kafka_offset").to_numpy(),
            records.column("kafka_partition").to_numpy(),
            codes,
        )
    )
    quantity = records.column("quantity").to_numpy(zero_copy_only=False)[order]
    event_time = records.column("event_time_ms").to_numpy().astype(np.int64)[order]
    value = records.column("value").to_numpy().astype(np.float64)[order]
    row_id = records.column("row_id").to_numpy(zero_copy_only=False)[order]
    sorted_codes = codes[order]
    bounds = np.searchsorted(sorted_codes, np.arange(len(names) + 1))
    by_rank = sorted(names)
    keyed = [
        (
            by_rank[k],
            Records(
                quantity[bounds[k] : bounds[k + 1]],
                event_time[bounds[k] : bounds[k + 1]],
                value[bounds[k] : bounds[k + 1]],
                row_id[bounds[k] : bounds[k + 1]],
            ),
        )
        for k in range(len(names))  # each a thing of this batch: never an empty slice
    ]
    return keyed, (undecodable if undecodable.num_rows else None), now


class DriverStateBatches:
    """``foreachBatch`` function: the batch's records through the table, its outputs and the
    marker in one transaction of ``sink``. See the module docstring for the protocol."""

    def __init__(
        self,
        table: KeyedStates,
        render: Render,
        fields: Fields,
        nullable: frozenset[str],
        outputs: KafkaOutputs,
        sink: ExactlyOnceSink,
        files: StateFiles,
    ) -> None:
        self.table, self.render, self.fields, self.nullable = table, render, fields, nullable
        self.outputs, self.sink, self.files = outputs, sink, files
        self.query_name = sink.query_name
        #: the batch whose committed state the table holds; None: untrusted, read the file
        self.table_batch: int | None = None

    def _restore(self, committed: int) -> None:
        if self.table_batch == committed:
            return
        self.table.restore(self.files.read(committed) if committed >= 0 else None)
        self.table_batch = committed
        STATE_KEYS.labels(self.query_name).set(len(self.table))
        log.info(
            "driver state restored",
            extra={"query": self.query_name, "batch_id": committed, "keys": len(self.table)},
        )

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        self.sink.open(query_id)
        self._restore(self.sink.last_committed)
        if batch_id <= self.sink.last_committed:  # a replay of a committed batch
            self.sink.write_batch(batch_id, ())
            return
        started = time.perf_counter()
        arrow = batch_df.toArrow()
        self.sink.note_phase("collect", time.perf_counter() - started)
        try:
            self._write(batch_id, arrow)
        except BaseException:
            self.table_batch = None
            raise

    def _write(self, batch_id: int, arrow: pa.Table) -> None:
        started = time.perf_counter()
        keyed, undecodable, now = split_batch(arrow)
        step = self.table.step(keyed, now) if now is not None else None
        if (step is None or not step.changed) and undecodable is None:
            # nothing moved: the table stays the marker's batch's, and nothing is written
            self.sink.write_batch(batch_id, (), rows_hint=0)
            return
        assert step is not None
        out = OutputRows(self.fields, self.nullable)
        for key, batch, emitted in step.emitted:
            self.render(out, (key,), batch, emitted, {})
        if undecodable is not None:
            dead_letters.add_rows(
                out,
                undecodable.column("undecodable_key").to_numpy(zero_copy_only=False),
                undecodable.column("undecodable_value").to_numpy(zero_copy_only=False),
                undecodable.column("kafka_partition").to_numpy(),
                undecodable.column("kafka_offset").to_numpy(),
            )
        rows = self.outputs.rows(out)
        snapshot = self.table.snapshot()
        self.files.write(batch_id, snapshot)
        self.sink.note_phase("state", time.perf_counter() - started)
        outcome = self.sink.write_batch(batch_id, rows, rows_hint=len(rows), always=True)
        if outcome in ("committed", "skipped"):  # skipped: an earlier attempt did commit it
            self.table_batch = batch_id
            self.files.prune(batch_id)
        STATE_KEYS.labels(self.query_name).set(len(self.table))
        STATE_BYTES.labels(self.query_name).set(len(snapshot))


def with_batch_time(frame: DataFrame) -> DataFrame:
    """The batch's processing time on every row: Spark puts the batch's own timestamp, kept in
    its offset log, in ``current_timestamp()``, so a replay sees the same time."""
    from pyspark.sql import functions as F

    return frame.withColumn(BATCH_TIME, F.unix_millis(F.current_timestamp()))


def with_heartbeat(spark: SparkSession, frame: DataFrame) -> DataFrame:
    """``frame`` and one row a second from a rate source, every column null: a batch runs
    every trigger even when no record comes, so timers fire."""
    from pyspark.sql import functions as F

    beats = (
        spark.readStream.format("rate").option("rowsPerSecond", 1).option("numPartitions", 1).load()
    )
    return frame.unionByName(
        beats.select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in frame.schema.fields])
    )
