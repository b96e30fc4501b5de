"""Where the code, its installed tools and its run directory are, in a checkout or installed.

Kept in one place so the launcher, the tests and the services agree on them without passing
paths around. Run from a checkout, everything is inside it (``run/``, ``.env``, ``.stack/``);
installed with ``pip install .``, nothing points into site-packages: the run directory and the
installed servers go to the user's XDG directories and ``.env`` is read from the working
directory, as docker compose reads it (docs/operations.md, "Installed without a checkout").
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: Where the packages are imported from: a checkout, or site-packages once installed.
CODE_ROOT = Path(__file__).resolve().parent.parent
#: The checkout the code runs from; None when it was installed.
CHECKOUT: Path | None = CODE_ROOT if (CODE_ROOT / "pyproject.toml").is_file() else None
#: The repository's root: the tests' and the repository's own tools' (docs, compose) files.
REPO_ROOT = CODE_ROOT


def _xdg(variable: str, fallback: str) -> Path:
    return Path(os.environ.get(variable) or Path.home() / fallback) / "machinedata-stack"


#: The servers and jars scripts/setup.sh installs: in the checkout, else the user's data dir.
STACK_DIR = CHECKOUT / ".stack" if CHECKOUT else _xdg("XDG_DATA_HOME", ".local/share")
KAFKA_JARS_DIR = STACK_DIR / "jars" / "kafka"
SPARK_JARS_DIR = STACK_DIR / "jars" / "spark"
#: Apicurio Registry's runner jar and its lib/ (scripts/setup.sh), the optional schema registry.
APICURIO_DIR = STACK_DIR / "apicurio"
#: Downloads and built tools (scripts/setup.sh), generated benchmark input, the JVM's class archive.
CACHE_DIR = Path.home() / ".cache" / "machinedata-stack"


def default_run_dir() -> Path:
    """``run/`` of the checkout; installed: the user's state directory."""
    return CHECKOUT / "run" if CHECKOUT else _xdg("XDG_STATE_HOME", ".local/state") / "run"


def dotenv_path() -> Path:
    """The ``.env`` the settings read: the checkout's (docker compose's file), else the one in
    the working directory."""
    return CHECKOUT / ".env" if CHECKOUT else Path.cwd() / ".env"


def find_influxd() -> Path | None:
    """influxd 1.8.10 is built by scripts/setup.sh; users may also point INFLUXD_BIN at one."""
    candidates = [
        os.environ.get("INFLUXD_BIN", ""),
        str(STACK_DIR / "influxd"),
        str(CACHE_DIR / "bin" / "influxd"),
        shutil.which("influxd") or "",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def find_program(name: str, *extra_dirs: str) -> Path | None:
    """Debian puts some daemons in /usr/sbin, which is not on every user's PATH."""
    found = shutil.which(
        name, path=os.pathsep.join([os.environ.get("PATH", ""), *extra_dirs, "/usr/sbin", "/sbin"])
    )
    return Path(found) if found else None


def private_directory(path: Path) -> Path:
    """``path`` as a directory only its owner can enter (0700), made so or tightened."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


@contextlib.contextmanager
def private_file(path: Path) -> Iterator[BinaryIO]:
    """Open ``path`` for writing with mode 0600 from its first byte: no moment in which another
    user could open it (a chmod after writing leaves one). An existing file is replaced."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        yield handle
