"""The session our jobs share starts Python workers that keep their zip archives' directories."""
from __future__ import annotations

from typing import Iterator

import pytest

pytestmark = [pytest.mark.spark]


def archives_reread_by_invalidation(_: Iterator[int]) -> Iterator[tuple[int, int]]:
    """In a worker: (zip importers on sys.path, those whose directory a cache invalidation re-read)."""
    import importlib
    import sys
    import zipimport

    importers = [i for i in sys.path_importer_cache.values() if isinstance(i, zipimport.zipimporter)]
    before = [id(i._files) for i in importers]  # type: ignore[attr-defined]
    importlib.invalidate_caches()
    yield len(importers), sum(id(i._files) != b for i, b in zip(importers, before))  # type: ignore[attr-defined]


def test_python_workers_do_not_reread_archives_per_task() -> None:
    from spark_jobs.session import build_session

    spark = build_session("daemon-check")
    try:
        (importers, reread), = spark.sparkContext.parallelize([0], 1).mapPartitions(archives_reread_by_invalidation).collect()
    finally:
        spark.stop()
    assert importers >= 1, "no zip archive on the workers' path: the check would prove nothing"
    assert reread == 0, f"{reread} of {importers} archives re-read at every task"
