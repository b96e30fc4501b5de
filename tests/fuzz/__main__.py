"""python -m tests.fuzz TARGET [libFuzzer options and corpus folders]: one target of
tests/fuzz/targets.py under atheris, coverage-guided over the project's own code.

Only the project's packages are instrumented: instrumenting everything they import (the standard
library, fastavro, confluent_kafka, ...) made the start-up dominate a short run, and coverage of
those modules is not what the targets are there to explore.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import atheris


def project_packages() -> list[str]:
    """The project's own top-level packages (pyproject's package list) and the tests: read from
    the file so that a new package is instrumented without anyone remembering this list."""
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as handle:
        found = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]["include"]
    return [*(pattern.rstrip("*") for pattern in found), "tests"]


with atheris.instrument_imports(include=project_packages()):
    from tests.fuzz.targets import TARGETS


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(
            f"usage: python -m tests.fuzz {{{'|'.join(TARGETS)}}} [libFuzzer options] [corpus dirs]"
        )
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
