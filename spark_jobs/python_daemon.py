"""The Python worker daemon Spark starts for our jobs (``spark.python.daemon.module``): PySpark's
own, with one per-task cost removed.

Before every task a PySpark worker calls ``importlib.invalidate_caches()``. On Python 3.10 and
3.11 that re-reads the whole central directory of every zip archive on ``sys.path``, and Spark
puts three there: pyspark.zip, py4j's zip and the spark-core jar (thousands of entries). Profiled
live, that was half of the Python workers' time in a small micro-batch (CPython issue 103200;
Python 3.12 and SPARK-54744 make it lazy). Those archives never change while a worker lives, and
an archive Spark adds later (``--py-files``) is a new path that gets its own importer anyway, so
the daemon makes the re-read a no-op before forking its workers, which inherit it.
"""

from __future__ import annotations

import runpy
import zipimport


def _archives_do_not_change(self: zipimport.zipimporter) -> None:
    """An archive's directory was read when its importer was made; it stays valid."""


def main() -> None:
    zipimport.zipimporter.invalidate_caches = _archives_do_not_change  # type: ignore[method-assign]
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
