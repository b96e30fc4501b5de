"""python -m tests.drivers.cluster_probe MASTER [--hold]: one small job through our session on
a Spark cluster (the secret in SPARK_CLUSTER_PASSWORD, never on a command line); prints JSON of
where its Python code ran. ``--hold``: then keeps the session (its driver, executors and Python
workers) until its standard input closes, for a test to look at the processes.

A process of its own: a test process may already hold a JVM of a ``local`` session, and a
session's master is fixed when its JVM starts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def _ancestors() -> list[str]:
    """Command lines of this process's ancestors, nearest first."""
    lines, pid = [], os.getppid()
    while pid > 1:
        try:
            lines.append(
                open(f"/proc/{pid}/cmdline", "rb")
                .read()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return lines


def where(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """In a Python worker: its pid, whether an executor JVM is an ancestor, and whether the
    jobs' package imports there (executors get this checkout on their path)."""
    import pandas as pd

    import spark_jobs  # noqa: F401

    rows = sum(len(frame) for frame in frames)
    executor = any("CoarseGrainedExecutorBackend" in line for line in _ancestors())
    yield pd.DataFrame({"pid": [os.getpid()], "executor": [executor], "rows": [rows]})


def main() -> None:
    from spark_jobs.session import build_session

    master, hold = sys.argv[1], "--hold" in sys.argv[2:]
    secret = os.environ.get("SPARK_CLUSTER_PASSWORD", "")
    spark = build_session("cluster-probe", master, 2, cluster_secret=secret)
    try:
        result = (
            spark.range(0, 1000, 1, 4)
            .mapInPandas(where, "pid long, executor boolean, rows long")
            .collect()
        )
        jvm = spark.sparkContext._jvm
        assert jvm is not None, "the session has no JVM"
        # without the driver
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        print(
            json.dumps(
                {
                    "executors": executors,
                    "rows": sum(r.rows for r in result),
                    "python_pids": sorted({r.pid for r in result}),
                    "on_executors": all(r.executor for r in result),
                    "driver_jvm": jvm.java.lang.ProcessHandle.current().pid(),
                    "ui": spark.sparkContext.uiWebUrl,
                }
            ),
            flush=True,
        )
        if hold:
            sys.stdin.read()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
