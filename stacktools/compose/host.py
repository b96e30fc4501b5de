"""What the host must give docker compose before ``up``, checked by ``python3 -m
stacktools.compose.env``: Compose v2.20 or newer (the compose file's ``depends_on`` uses
``required``, which older versions reject), and bind-mounted files that the images' non-root
users (uid 1000, nobody, 472) can read: a checkout made under a umask stricter than 022 leaves
them unreadable, and the servers then crash-loop on their own configuration. Standard library
only, like the command that calls it."""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

from streamkit.paths import REPO_ROOT

MINIMUM_COMPOSE = (2, 20, 0)
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
#: A bind mount in the compose file's short syntax: ``- ./host/path:/container/path[:mode]``.
BIND_MOUNT = re.compile(r"^\s+- (\./[^:\s]+):")
COMPOSE_COMMANDS = (["docker", "compose"], ["docker-compose"])


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``2.40.3`` (also ``v2.40.3`` or ``Docker Compose version v2.40.3``) as a tuple."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def compose_version() -> tuple[int, int, int] | None:
    """The version of the first Compose that answers, ``docker compose`` first; None without
    one."""
    for command in COMPOSE_COMMANDS:
        try:
            done = subprocess.run(
                [*command, "version", "--short"],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and (version := parse_version(done.stdout)):
            return version
    return None


def compose_problem(version: tuple[int, int, int] | None) -> str | None:
    needed = ".".join(map(str, MINIMUM_COMPOSE))
    if version is None:
        return f"no docker compose found: Docker Compose v{needed} or newer is needed"
    if version < MINIMUM_COMPOSE:
        found = ".".join(map(str, version))
        return f"docker compose {found} is too old: v{needed} or newer is needed"
    return None


def bind_mounted(compose_file: Path = COMPOSE_FILE) -> list[Path]:
    """The host paths the compose file bind-mounts, as it names them."""
    root = compose_file.parent
    sources = {
        found[1]
        for line in compose_file.read_text().splitlines()
        if (found := BIND_MOUNT.match(line))
    }
    return sorted(root / source for source in sources)


def unreadable_by_others(paths: list[Path]) -> list[Path]:
    """Files under ``paths`` that other users cannot read, and directories they cannot list."""
    found = []
    for top in paths:
        if not top.exists():
            continue
        for path in [top, *top.rglob("*")] if top.is_dir() else [top]:
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            wanted = stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0)
            if mode & wanted != wanted:
                found.append(path)
    return found


def make_readable(paths: list[Path]) -> None:
    """Give other users read (and, on directories, search) rights: these are the repository's
    configurations and the replay's input, none of them secret."""
    for path in paths:
        mode = path.stat().st_mode | stat.S_IROTH | stat.S_IRGRP
        if path.is_dir():
            mode |= stat.S_IXOTH | stat.S_IXGRP
        path.chmod(mode)
