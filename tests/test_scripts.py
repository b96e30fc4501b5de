"""The shell entry points answer ``--help`` at once: a user asking what a script does must not
get an installer run (apt, pip, Maven, Go, podman) first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh"))


def test_there_are_scripts() -> None:
    assert {p.name for p in SCRIPTS} >= {"setup.sh", "test.sh", "demo.sh", "lint.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_answers_without_installing(script: Path) -> None:
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=30, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "no help text"
    # every installer step announces itself as "[setup] ..." or "[setup-containers] ..."
    assert "[setup" not in done.stdout + done.stderr
