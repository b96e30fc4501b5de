"""python -m tests.support.faulty_join: ``python -m spark_jobs.join`` with the sink's fault hook
from ``EOS_FAULT_POINT`` / ``EOS_FAULT_BATCH`` installed (tests/support/sink_faults.py), so the fault
tests kill the real job at a named point while the job itself has no test switch."""
from __future__ import annotations

import sys

from spark_jobs import join
from spark_jobs.config import JoinSettings
from streamkit.service import run_service
from tests.support.sink_faults import kill_hook_from_env


def main(argv: list[str] | None = None) -> int:
    hook = kill_hook_from_env()
    return run_service("spark_join", JoinSettings, join.__doc__, argv,
                       lambda settings, shutdown: join.run(settings, shutdown, fault_hook=hook),
                       check=join.check, module="tests.support.faulty_join")


if __name__ == "__main__":
    sys.exit(main())
