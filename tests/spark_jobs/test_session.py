"""The session our jobs share starts Python workers that keep their zip archives' directories."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]


def archives_reread_by_invalidation(_: Iterable[int]) -> Iterator[tuple[int, int]]:
    """In a worker: (zip importers on sys.path, those whose directory a cache invalidation
    re-read)."""
    import importlib
    import sys
    import zipimport

    importers = [
        i for i in sys.path_importer_cache.values() if isinstance(i, zipimport.zipimporter)
    ]
    before = [id(i._files) for i in importers]  # type: ignore[attr-defined]
    importlib.invalidate_caches()
    reread = sum(
        id(i._files) != b  # type: ignore[attr-defined]
        for i, b in zip(importers, before, strict=True)
    )
    yield len(importers), reread


def test_python_workers_do_not_reread_archives_per_task() -> None:
    from spark_jobs.session import build_session

    spark = build_session("daemon-check")
    try:
        ((importers, reread),) = (
            spark.sparkContext.parallelize([0], 1)
            .mapPartitions(archives_reread_by_invalidation)
            .collect()
        )
    finally:
        spark.stop()
    assert importers >= 1, "no zip archive on the workers' path: the check would prove nothing"
    assert reread == 0, f"{reread} of {importers} archives re-read at every task"


def test_the_listener_gets_each_progress_event_as_one_json_crossing() -> None:
    """A real query's progress reaches the listener through its JSON callback, as the object
    PySpark's own converter would build (sources, batch ids), and goes to /metrics."""
    import time

    from prometheus_client import REGISTRY

    from spark_jobs.listener import attach
    from spark_jobs.session import build_session

    spark = build_session("listener-json")
    try:
        listener = attach(spark, "json-progress")
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .writeStream.queryName("json-progress")
            .format("noop")
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and (REGISTRY.get_sample_value("spark_last_batch_id", {"query": "json-progress"}) or 0)
            < 2
        ):
            time.sleep(0.2)
        query.stop()
    finally:
        spark.stop()
    progress = listener.last_progress["json-progress"]
    assert progress.batchId >= 2 and progress.sources[0].description.startswith("RateStream")
    # a rate source's rows are no records read (the driver state's heartbeat)
    assert REGISTRY.get_sample_value("spark_input_rows_total", {"query": "json-progress"}) == 0


def test_a_query_starts_over_the_temporary_file_of_a_killed_first_offset_write(
    tmp_path: Path,
) -> None:
    """A driver SIGKILLed while writing its first offset log entry leaves only the write's
    temporary file; the next start must run the query, not refuse the directory forever."""
    import time

    from spark_jobs.session import build_session

    checkpoint = tmp_path / "checkpoint"
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.bebf53c2-2661-45e9-855e-407d797a0319.tmp").write_text("")
    (offsets / "..0.bebf53c2-2661-45e9-855e-407d797a0319.tmp.crc").write_text("")
    spark = build_session("killed-first-offset")
    try:
        query = (
            spark.readStream.format("rate")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        deadline = time.monotonic() + 60
        while query.isActive and not (offsets / "1").is_file():
            assert time.monotonic() < deadline, "no batch ran"
            time.sleep(0.2)
        error = query.exception()
        query.stop()
    finally:
        spark.stop()
    assert error is None, error
    assert (offsets / "1").is_file()
