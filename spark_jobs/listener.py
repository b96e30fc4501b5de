"""StreamingQueryListener -> Prometheus: what a batch cost and how far event time got.

The sink's own counters (transactions committed/aborted, skipped replays) are defined in
``spark_jobs.eos_sink`` and land in the same default registry, so one /metrics endpoint per job
shows both the engine's and the sink's view of every batch.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryProgress,
)

from spark_jobs.source import EVENT_TIME_METRIC
from streamkit.health import beat

log = logging.getLogger("spark_jobs.listener")

BATCH_SECONDS = Histogram(
    "spark_batch_duration_seconds",
    "wall time of a micro-batch",
    ["query"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
INPUT_RATE = Gauge(
    "spark_input_rows_per_second", "input rows/s of the last batch (arrival rate)", ["query"]
)
PROCESSED_RATE = Gauge(
    "spark_processed_rows_per_second", "rows/s the last batch was processed at", ["query"]
)
INPUT_ROWS = Counter("spark_input_rows_total", "input rows processed", ["query"])
STATE_ROWS = Gauge(
    "spark_state_rows", "rows held in state stores (all stateful operators)", ["query"]
)
STATE_MEMORY = Gauge("spark_state_memory_bytes", "memory used by state stores", ["query"])
#: The bounds the StateOverBound alert compares the state's size with (the job's settings).
STATE_KEYS_BOUND = Gauge(
    "spark_state_keys_bound", "keys the query's state may hold before an alert", ["query"]
)
STATE_BYTES_BOUND = Gauge(
    "spark_state_bytes_bound", "bytes the query's state may take before an alert", ["query"]
)
DROPPED_BY_WATERMARK = Counter(
    "spark_rows_dropped_by_watermark_total",
    "rows Spark's own stateful operators dropped as too late",
    ["query"],
)
EVENT_TIME = Gauge(
    "spark_event_time_seconds", "newest event time the query has read (Unix seconds)", ["query"]
)
LAST_BATCH = Gauge("spark_last_batch_id", "id of the last completed micro-batch", ["query"])
QUERIES_ACTIVE = Gauge(
    "spark_queries_active", "streaming queries running in this driver", ["query"]
)


def export_state_bounds(query: str, keys: int, size: int) -> None:
    """The query's bounds on its state, beside the state's own figures, for the alert."""
    STATE_KEYS_BOUND.labels(query).set(keys)
    STATE_BYTES_BOUND.labels(query).set(size)


def _records_read(progress: Any) -> int:
    """The batch's input rows from Kafka: a heartbeat source's rows (``spark_jobs.driver_state``)
    are no records, and the demo and the alerts compare this count with the raw topic's."""
    sources = progress.sources or []
    if not sources:
        return int(progress.numInputRows)
    return sum(
        int(source.numInputRows)
        for source in sources
        if not str(source.description).startswith("RateStream")
    )


def attach(spark: Any, query_name: str) -> PrometheusListener:
    """Register the listener on ``spark``'s streams, its counters for ``query_name`` shown at 0.

    A labelled counter appears at its first increment: a query whose first batch reads a whole
    replay would be born with that count, and ``increase()`` (the alerts, the rates) sees no
    rise in it. Shown at 0 before the query starts, its first batch is a rise."""
    for counter in (INPUT_ROWS, DROPPED_BY_WATERMARK):
        counter.labels(query_name)
    listener = PrometheusListener()
    spark.streams.addListener(listener)
    return listener


class _JsonProgress:
    """The py4j callback the JVM's listener wrapper calls. PySpark's own converts a progress
    event field by field, each a py4j round trip (hundreds per batch, a third of a live
    driver's Python time in a profile); here the event crosses once, as the JSON Spark writes
    for it, into the same progress object."""

    def __init__(self, listener: StreamingQueryListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 (the Java interface's names)
        self.listener.onQueryStarted(QueryStartedEvent.fromJObject(jevent))

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        try:
            progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        except Exception:  # a metrics bug must never fail the query's listener bus
            log.exception("listener could not read a progress event")
            return
        self.listener.onQueryProgress(QueryProgressEvent(progress))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        self.listener.onQueryIdle(QueryIdleEvent.fromJObject(jevent))

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJObject(jevent))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class PrometheusListener(StreamingQueryListener):
    """Exports each progress event; keeps nothing but the last progress per query for callers."""

    @property
    def _jlistener(self) -> Any:
        """What ``spark.streams.addListener`` registers: the JVM wrapper around
        :class:`_JsonProgress` instead of PySpark's field-by-field converter."""
        if not hasattr(self, "_json_listener"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None, "no Spark session"
            self._json_listener = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(self))
        return self._json_listener

    def __init__(self) -> None:
        super().__init__()
        self.last_progress: dict[str, Any] = {}
        self.newest_event_s: dict[
            str, float
        ] = {}  # per query: a batch's maximum never moves it back

    def onQueryStarted(self, event: Any) -> None:
        name = event.name or str(event.id)
        QUERIES_ACTIVE.labels(name).set(1)
        log.info(
            "query started",
            extra={"query": name, "query_id": str(event.id), "run_id": str(event.runId)},
        )

    def onQueryProgress(self, event: Any) -> None:
        beat()
        try:
            self.record(event.progress)
        except Exception:  # a metrics bug must never fail the query's listener bus
            log.exception("listener failed to export progress")

    def record(self, progress: Any) -> None:
        name = progress.name or str(progress.id)
        self.last_progress[name] = progress
        BATCH_SECONDS.labels(name).observe(progress.batchDuration / 1000.0)
        INPUT_RATE.labels(name).set(_finite(progress.inputRowsPerSecond))
        PROCESSED_RATE.labels(name).set(_finite(progress.processedRowsPerSecond))
        records = _records_read(progress)
        INPUT_ROWS.labels(name).inc(records)
        LAST_BATCH.labels(name).set(progress.batchId)
        operators = progress.stateOperators or []
        STATE_ROWS.labels(name).set(sum(op.numRowsTotal for op in operators))
        STATE_MEMORY.labels(name).set(sum(op.memoryUsedBytes for op in operators))
        dropped = sum(op.numRowsDroppedByWatermark for op in operators)
        if dropped:
            DROPPED_BY_WATERMARK.labels(name).inc(dropped)
        newest = _observed(progress, EVENT_TIME_METRIC, "newest_ms")
        if newest is not None:
            self.newest_event_s[name] = max(
                newest / 1000, self.newest_event_s.get(name, newest / 1000)
            )
            EVENT_TIME.labels(name).set(self.newest_event_s[name])
        log.info(
            "batch progress",
            extra={
                "query": name,
                "batch_id": progress.batchId,
                "input_rows": records,
                "duration_ms": progress.batchDuration,
                "phases_ms": dict(getattr(progress, "durationMs", None) or {}),
                "state_ms": _state_times(operators),
            },
        )

    def onQueryIdle(self, event: Any) -> None:
        beat()  # no new data: idle, not stalled

    def onQueryTerminated(self, event: Any) -> None:
        for name, progress in self.last_progress.items():
            if str(progress.id) == str(event.id):
                QUERIES_ACTIVE.labels(name).set(0)
        log.info(
            "query terminated", extra={"query_id": str(event.id), "exception": event.exception}
        )


def _state_times(operators: list[Any]) -> dict[str, int]:
    """Where a batch's stateful time went (ms, summed over operators): updates, removals, the
    commit, and the state store's own latencies (RocksDB's flush, checkpoint, file sync...)."""
    times: dict[str, int] = {}
    for op in operators:
        for name, value in (
            ("updates", op.allUpdatesTimeMs),
            ("removals", op.allRemovalsTimeMs),
            ("commit", op.commitTimeMs),
        ):
            times[name] = times.get(name, 0) + int(value or 0)
        for name, value in (op.customMetrics or {}).items():
            if "Latency" in name or name.endswith("Ms"):
                times[name] = times.get(name, 0) + int(value or 0)
    return times


def _observed(progress: Any, metric: str, field: str) -> Any:
    """A field of an observed metric (``DataFrame.observe``) of this batch, None if absent."""
    row = (getattr(progress, "observedMetrics", None) or {}).get(metric)
    if row is None:
        return None
    return (row.asDict() if hasattr(row, "asDict") else dict(row)).get(field)


def _finite(value: float | None) -> float:
    return (
        float(value)
        if value is not None and value == value and value not in (float("inf"), float("-inf"))
        else 0.0
    )
