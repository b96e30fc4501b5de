"""Python workers started before the first batch needs them.

A batch hands each thing's rows to Python workers that Spark forks on demand and then reuses.
The first batch after a start would pay for forking them and importing pandas, pyarrow and the
job's own modules. :func:`warm_python_workers` runs a tiny ``mapInPandas`` job, one task per
core the stateful stage runs on, whose function imports the job's module, while the streaming
query is busy planning its first batch on the driver; the idle workers it leaves are the ones
the batch's tasks get.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

log = logging.getLogger("spark_jobs.warmup")


class ImportJobModule:
    """The warm-up's function: runs in a worker, imports the job there. Picklable."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __call__(self, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        importlib.import_module(self.module)
        yield from frames


def warm_python_workers(spark: SparkSession, module: str, tasks: int) -> threading.Thread:
    """Start the warm-up in a thread; a failure is only logged (the batch then starts its own
    workers)."""

    def run() -> None:
        started = time.monotonic()
        try:
            spark.range(0, tasks, 1, tasks).mapInPandas(
                ImportJobModule(module), "id long"
            ).collect()
            log.info(
                "python workers warmed",
                extra={
                    "module": module,
                    "tasks": tasks,
                    "seconds": round(time.monotonic() - started, 2),
                },
            )
        except Exception as exc:
            log.warning("python workers not warmed", extra={"module": module, "error": str(exc)})

    thread = threading.Thread(target=run, name="warm-python-workers", daemon=True)
    thread.start()
    return thread
