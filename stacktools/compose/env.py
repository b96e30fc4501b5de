"""python3 -m stacktools.compose.env [--output .env] [--force] [--check]

Writes docker compose's ``.env`` from ``.env.example`` with a generated password for every
``change-me`` and a new KRaft cluster id, mode 0600; ``.env.example`` keeps its placeholders.
An existing file is kept unless ``--force``. ``--check`` only says which passwords of an existing
file would be refused (placeholder, empty, short), or whether the schema registry's two switches
disagree, and exits 1 if any. Standard library only: it
runs with any Python 3.11 before the project is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from stacktools.compose.credentials import (
    PLACEHOLDER,
    new_cluster_id,
    new_password,
    password_problem,
)
from streamkit.cli import HelpFormatter, entry_point, program_name
from streamkit.config import read_env_file
from streamkit.fields import is_secret_variable
from streamkit.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / ".env.example"


def render(example: str) -> str:
    """``example`` with every placeholder password generated and a fresh cluster id, the
    comments and order kept."""
    lines = []
    for line in example.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            if is_secret_variable(key) and value == PLACEHOLDER:
                line = f"{key}={new_password()}"
            elif key == "KAFKA_CLUSTER_ID":
                line = f"{key}={new_cluster_id()}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def registry_problem(values: dict[str, str]) -> str | None:
    """SCHEMA_REGISTRY and the `registry` profile go together: services that expect the registry
    without one never start (it is unreachable), and a registry nobody writes to is a mistake."""
    wanted = values.get("SCHEMA_REGISTRY", "false").strip().lower() in {"true", "1", "yes", "on"}
    profiles = {name.strip() for name in values.get("COMPOSE_PROFILES", "").split(",")}
    if wanted == ("registry" in profiles):
        return None
    return (
        "SCHEMA_REGISTRY=true needs COMPOSE_PROFILES=registry (the registry service) and the "
        "other way round: set both or neither (docs/containers.md)"
    )


def problems(path: Path) -> list[str]:
    values = read_env_file(path)
    found = [
        problem
        for key, value in values.items()
        if is_secret_variable(key) and (problem := password_problem(key, value))
    ]
    return found + [problem] if (problem := registry_problem(values)) else found


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    path.chmod(0o600)


@entry_point("stacktools.compose.env")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.compose.env"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--output", type=Path, default=REPO_ROOT / ".env", help="the file to write (default: .env)"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing file (its passwords are lost)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check an existing file (its passwords, the schema registry's switches)",
    )
    args = parser.parse_args(argv)
    if args.check or (args.output.exists() and not args.force):
        if not args.output.exists():
            print(f"{args.output} does not exist", file=sys.stderr)
            return 1
        found = problems(args.output)
        for problem in found:
            print(problem, file=sys.stderr)
        if not args.check:
            print(f"{args.output} exists: kept (--force writes a new one)")
        return 1 if found else 0
    write_private(args.output, render(EXAMPLE.read_text()))
    print(
        f"wrote {args.output} (mode 0600) with generated passwords; keep it out of version control"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
