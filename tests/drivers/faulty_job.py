"""python -m tests.drivers.faulty_job <job module> [options]: a Spark job (``spark_jobs.join``,
``spark_jobs.single_pass``, ...) with the sink's fault hook from ``EOS_FAULT_POINT`` /
``EOS_FAULT_BATCH`` installed (tests/support/sink_faults.py), so the fault tests kill the real
job at a named point while the job itself has no test switch."""

from __future__ import annotations

import importlib
import sys

from tests.support.sink_faults import kill_hook_from_env


def main(argv: list[str] | None = None) -> int:
    module, *options = sys.argv[1:] if argv is None else argv
    job = importlib.import_module(module).JOB
    return job.main(
        options, fault_hook=kill_hook_from_env(), module=f"tests.drivers.faulty_job {module}"
    )


if __name__ == "__main__":
    sys.exit(main())
