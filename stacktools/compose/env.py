"""python3 -m stacktools.compose.env [--output .env] [--force] [--check]

Writes docker compose's ``.env`` from ``.env.example`` with a generated password for every
``change-me`` and a new KRaft cluster id, mode 0600; ``.env.example`` keeps its placeholders.
An existing file is kept unless ``--force``. ``--check`` only says which passwords of an existing
file would be refused (placeholder, empty, short), or whether the schema registry's two switches
disagree, and exits 1 if any. Either way it checks the host: Docker Compose new enough, and the
bind-mounted files readable by the containers' users (it makes them so, and says which). Standard
library only: it runs with any Python 3.11 before the project is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from stacktools.compose import host
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


#: The `cluster` profile's nodes, as the containers reach them.
CLUSTER_SERVERS = "kafka:19092,kafka-2:19092,kafka-3:19092"


def cluster_problem(values: dict[str, str]) -> str | None:
    """The `cluster` profile, KAFKA_BROKERS=3 and KAFKA_SERVERS go together: a profile without
    the count starts nodes the config job wrote nothing for, a count without the profile waits
    for a quorum that never forms, and clients that know one node cannot start while it is down."""
    profiles = {name.strip() for name in values.get("COMPOSE_PROFILES", "").split(",")}
    brokers = values.get("KAFKA_BROKERS", "1").strip()
    servers = values.get("KAFKA_SERVERS", "").strip()
    if ("cluster" in profiles and (brokers, servers) == ("3", CLUSTER_SERVERS)) or (
        "cluster" not in profiles and brokers == "1"
    ):
        return None
    return (
        "compose's three Kafka nodes need COMPOSE_PROFILES=cluster, KAFKA_BROKERS=3 and "
        f"KAFKA_SERVERS={CLUSTER_SERVERS}; one node needs none of them "
        "(docs/scaling.md#compose-three-kafka-nodes)"
    )


def problems(path: Path) -> list[str]:
    values = read_env_file(path)
    found = [
        problem
        for key, value in values.items()
        if is_secret_variable(key) and (problem := password_problem(key, value))
    ]
    switches = (registry_problem(values), cluster_problem(values))
    return found + [problem for problem in switches if problem]


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
    host_problem = check_host()
    env_status = write_or_check(args.output, force=args.force, check=args.check)
    return env_status or int(args.check and host_problem)


def check_host() -> bool:
    """Compose's version (a problem, said on stderr: True) and the bind mounts' rights (made
    readable, said on stdout)."""
    closed = host.unreadable_by_others(host.bind_mounted())
    if closed:
        host.make_readable(closed)
        print(
            f"made {len(closed)} bind-mounted files and folders readable for the containers' "
            f"users (the host's umask had closed them), e.g. {closed[0]}"
        )
    problem = host.compose_problem(host.compose_version())
    if problem:
        print(problem, file=sys.stderr)
    return problem is not None


def write_or_check(output: Path, *, force: bool, check: bool) -> int:
    """The .env part: 0 when the file is written, or kept or checked without a problem."""
    if check or (output.exists() and not force):
        if not output.exists():
            print(f"{output} does not exist", file=sys.stderr)
            return 1
        found = problems(output)
        for problem in found:
            print(problem, file=sys.stderr)
        if not check:
            print(f"{output} exists: kept (--force writes a new one)")
        return 1 if found else 0
    write_private(output, render(EXAMPLE.read_text()))
    print(f"wrote {output} (mode 0600) with generated passwords; keep it out of version control")
    return 0


if __name__ == "__main__":
    sys.exit(main())
