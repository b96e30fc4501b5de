"""The exactly-once sinks' one protocol, and the one SPARK_SINK chooses.

Both sinks write a batch's Kafka records in transactions and skip a batch their marker says is
committed: :class:`~spark_jobs.eos_sink.ExactlyOnceSink` produces from the driver, one
transaction a batch; :class:`~spark_jobs.executor_sink.ExecutorSink` from the executors, one
transaction per output partition. The runner needs only what :class:`Sink` declares.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from spark_jobs.config import SparkJobSettings
from spark_jobs.eos_sink import ExactlyOnceSink, FaultHook
from spark_jobs.executor_sink import ExecutorSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Sink(Protocol):
    """What ``foreachBatch`` calls, and what the runner asks of it around the query."""

    @property
    def last_committed(self) -> int:
        """The id of the last batch this sink committed (-1: none)."""

    def prepare(self) -> None:
        """Connects and reads its marker; runs while the JVM starts."""

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Writes the batch exactly once, or raises so that Spark replays it."""

    def close(self) -> None:
        """Lets go of its producers."""


#: A job's per-batch function built around its sink and checkpoint (``foreachBatch``).
BatchStage = Callable[[Any, Path], Callable[[Any, int], None]]


def make_sink(
    settings: SparkJobSettings, query_name: str, fault_hook: FaultHook | None = None
) -> Sink:
    """The exactly-once sink SPARK_SINK asks for."""
    if settings.sink == "driver":
        return ExactlyOnceSink(
            settings,
            query_name,
            settings.marker_topic,
            transaction_timeout=settings.transaction_timeout,
            fault_hook=fault_hook,
        )
    if settings.sink == "executors":
        return ExecutorSink(
            settings,
            query_name,
            settings.marker_topic,
            settings.sink_partitions,
            transaction_timeout=settings.transaction_timeout,
            fault_hook=fault_hook,
        )
    raise ValueError(f"SPARK_SINK={settings.sink!r}: driver or executors")
