"""A peer framework's own virtual environment, for the benchmarks that compare against it.

A peer (e.g. Quix Streams) brings its own pins of confluent-kafka, pydantic and friends, which
must never change the project's environment; so it lives in a venv of its own, created once and
reused (pip runs only when the pinned requirement is missing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEFAULT_ROOT = Path.home() / ".cache" / "streamstack" / "peers"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def has_requirement(venv: Path, distribution: str, version: str) -> bool:
    """Whether the venv's python sees exactly that version of the distribution."""
    python = venv_python(venv)
    if not python.exists():
        return False
    probe = (
        f"import importlib.metadata as m, sys; "
        f"sys.exit(0 if m.version({distribution!r}) == {version!r} else 1)"
    )
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def ensure_venv(venv: Path, distribution: str, version: str, extras: str = "") -> Path:
    """The venv's python with ``distribution[extras]==version`` installed; idempotent."""
    if has_requirement(venv, distribution, version):
        return venv_python(venv)
    if not venv_python(venv).exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        # The project venv's python would make a venv of its base interpreter anyway; say so.
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    requirement = f"{distribution}[{extras}]=={version}" if extras else f"{distribution}=={version}"
    print(f"installing {requirement} into {venv} ...", flush=True)
    subprocess.run(
        [
            str(venv_python(venv)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            requirement,
        ],
        check=True,
    )
    if not has_requirement(venv, distribution, version):
        raise RuntimeError(f"{requirement} is still missing from {venv} after pip install")
    return venv_python(venv)
