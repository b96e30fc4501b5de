"""python -m tests.support.faulty_join: ``python -m spark_jobs.join`` with the sink's fault hook
from ``EOS_FAULT_POINT`` / ``EOS_FAULT_BATCH`` installed (tests/support/sink_faults.py), so the fault
tests kill the real job at a named point while the job itself has no test switch."""
from __future__ import annotations

import sys

from spark_jobs import join
from tests.support.sink_faults import kill_hook_from_env


def main(argv: list[str] | None = None) -> int:
    return join.JOB.main(argv, fault_hook=kill_hook_from_env(), module="tests.support.faulty_join")


if __name__ == "__main__":
    sys.exit(main())
