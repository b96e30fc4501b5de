"""The exactly-once sink's fault injection, on the test side only: a hook that SIGKILLs the
driver at one fault point of one batch, chosen by ``EOS_FAULT_POINT`` and ``EOS_FAULT_BATCH``,
or holds it there until the test lets it go (``EOS_PAUSE_GATE`` as well: a directory). The
tests set them for the driver processes they start; the services never read them."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

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


def pause_at(point: str, batch: int, gate: Path) -> FaultHook:
    """Hold the driver at ``point`` of ``batch``: it writes ``gate/paused`` and waits until
    ``gate/release`` exists (a partition test cuts the driver off while its transaction is
    open, and lets it go on after the link heals)."""

    def hook(at: str, batch_id: int) -> None:
        if at == point and batch_id == batch:
            log.warning("fault injection: paused", extra={"point": point, "batch_id": batch_id})
            (gate / "paused").touch()
            while not (gate / "release").exists():
                time.sleep(0.05)

    return hook


def kill_hook_from_env(environ: Mapping[str, str] | None = None) -> FaultHook | None:
    """The hook ``EOS_FAULT_POINT`` / ``EOS_FAULT_BATCH`` ask for (both set), else none: a
    pause with ``EOS_PAUSE_GATE`` set, else a SIGKILL."""
    environ = os.environ if environ is None else environ
    point, batch = environ.get("EOS_FAULT_POINT"), environ.get("EOS_FAULT_BATCH")
    if not (point and batch):
        return None
    gate = environ.get("EOS_PAUSE_GATE")
    return pause_at(point, int(batch), Path(gate)) if gate else kill_at(point, int(batch))
