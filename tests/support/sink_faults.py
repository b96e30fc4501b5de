"""The exactly-once sink's fault injection, on the test side only: a hook that SIGKILLs the
driver at one fault point of one batch, chosen by ``EOS_FAULT_POINT`` and ``EOS_FAULT_BATCH``
(the tests set them for the driver processes they start; the services never read them)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping

from spark_jobs.eos_sink import FaultHook

log = logging.getLogger("tests.support.sink_faults")


def kill_at(point: str, batch: int) -> FaultHook:
    """SIGKILL the driver at ``point`` of ``batch``: a crash, not an exception Python could
    catch. The driver's pid is taken here, so a hook pickled to an executor (the executors'
    sink: points like ``after_commit@1``, output partition 1) kills the driver and its own
    task there."""
    driver = os.getpid()

    def hook(at: str, batch_id: int) -> None:
        if at == point and batch_id == batch:
            log.warning("fault injection: SIGKILL", extra={"point": point, "batch_id": batch_id})
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(driver, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)  # in an executor: this task dies at the point too

    return hook


def kill_hook_from_env(environ: Mapping[str, str] | None = None) -> FaultHook | None:
    """The hook ``EOS_FAULT_POINT`` / ``EOS_FAULT_BATCH`` ask for (both set), else none."""
    environ = os.environ if environ is None else environ
    point, batch = environ.get("EOS_FAULT_POINT"), environ.get("EOS_FAULT_BATCH")
    return kill_at(point, int(batch)) if point and batch else None
