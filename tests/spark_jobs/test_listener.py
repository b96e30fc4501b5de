"""The listener's counters exist at 0 before a query's first batch: a first batch that reads a
whole replay must be a rise that ``increase()`` and the alerts see."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from spark_jobs import listener


class _AnyAttribute:
    """Stands for py4j's JVM view: every attribute path resolves."""

    def __getattr__(self, name: str) -> _AnyAttribute:
        return _AnyAttribute()


class _Streams:
    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def addListener(self, added: Any) -> None:  # noqa: N802 (PySpark's name)
        self.listeners.append(added)


class _Session:
    def __init__(self) -> None:
        self.sparkContext = type("Context", (), {"_jvm": _AnyAttribute()})()
        self.streams = _Streams()


def test_attach_shows_the_query_counters_at_zero_before_any_batch() -> None:
    session = _Session()
    name = "a-query-never-run"
    assert REGISTRY.get_sample_value("spark_input_rows_total", {"query": name}) is None
    attached = listener.attach(session, name)
    assert session.streams.listeners == [attached]
    for metric in ("spark_input_rows_total", "spark_rows_dropped_by_watermark_total"):
        assert REGISTRY.get_sample_value(metric, {"query": name}) == 0.0, metric


def test_the_records_read_leave_out_a_heartbeat_source() -> None:
    """A query's rows from Kafka, not the rate source's heartbeat rows (spark_jobs.driver_state)."""
    from types import SimpleNamespace as Progress

    kafka = Progress(description="KafkaV2[Subscribe[raw]]", numInputRows=40)
    beat = Progress(description="RateStreamV2[numPartitions=1, rowsPerSecond=1]", numInputRows=2)
    assert listener._records_read(Progress(sources=[kafka, beat], numInputRows=42)) == 40
    assert listener._records_read(Progress(sources=[], numInputRows=7)) == 7
