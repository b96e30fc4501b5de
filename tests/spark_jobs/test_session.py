"""The session our jobs share starts Python workers that keep their zip archives' directories."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

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


def test_progress_events_do_not_make_py4j_resolve_class_names() -> None:
    """PySpark converts each progress event's observed metrics through the JVM view's
    ``PythonSQLUtils``; after ``attach`` that name is found without asking the JVM."""
    from pyspark import SparkContext

    from spark_jobs.listener import attach
    from spark_jobs.session import build_session

    spark = build_session("listener-lookups")
    try:
        attach(spark, "listener-lookups")
        jvm = SparkContext._jvm
        assert jvm is not None, "the session started no JVM view"
        client = jvm._gateway_client
        sent: list[str] = []
        original = client.send_command

        def counting(command: str, *args: Any, **kwargs: Any) -> Any:
            sent.append(command)
            return original(command, *args, **kwargs)

        client.send_command = counting
        try:
            utils = jvm.PythonSQLUtils
            _ = jvm.SparkConf  # any other name still goes to the JVM: the counter can see it
        finally:
            client.send_command = original
        assert utils._fqn == "org.apache.spark.sql.api.python.PythonSQLUtils"
        assert len(sent) == 1 and "SparkConf" in sent[0], sent
    finally:
        spark.stop()
