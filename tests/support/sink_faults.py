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
    """SIGKILL ourselves at ``point`` of ``batch``: a crash, not an exception Python could catch."""

    def hook(at: str, batch_id: int) -> None:
        if at == point and batch_id == batch:
            log.warning("fault injection: SIGKILL", extra={"point": point, "batch_id": batch_id})
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def kill_hook_from_env(environ: Mapping[str, str] | None = None) -> FaultHook | None:
    """The hook ``EOS_FAULT_POINT`` / ``EOS_FAULT_BATCH`` ask for (both set), else none."""
    environ = os.environ if environ is None else environ
    point, batch = environ.get("EOS_FAULT_POINT"), environ.get("EOS_FAULT_BATCH")
    return kill_at(point, int(batch)) if point and batch else None
