"""python -m tests.fuzz TARGET [libFuzzer options and corpus folders]: one target of
tests/fuzz/targets.py under atheris, coverage-guided over the project's own code."""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
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
