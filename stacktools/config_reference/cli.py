"""python -m stacktools.config_reference [--check] [--output PATH]: the configuration reference.

Renders ``docs/configuration.md`` from the ``Settings`` dataclasses themselves (one row per
field: ``--option``, environment variable, type, default, help), so the document cannot drift
from the code: ``--check`` exits 1 when the file differs from what would be rendered now (the
unit tests run it). Every service option is a field, so the fields are the whole reference
(a tool's own flags, such as the dashboards checker's action and time range, are in its
``--help``); the variables docker compose sets for every application container are read from
``docker-compose.yml``.

The output must not depend on the machine or the environment: defaults are taken from the
dataclass fields (never from ``from_sources``), paths inside the repository are shown relative
to it, and secrets are never shown.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from stacktools.config_reference.render import env_conflicts, render
from stacktools.config_reference.texts import GENERATOR
from streamkit.cli import HelpFormatter, entry_point
from streamkit.paths import REPO_ROOT

OUTPUT = REPO_ROOT / "docs" / "configuration.md"


@entry_point("stacktools.config_reference")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=GENERATOR, description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the file differs from what would be rendered",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=OUTPUT,
        help="file to write or check (default docs/configuration.md)",
    )
    args = parser.parse_args(argv)
    rendered = render()
    conflicts = env_conflicts()
    if conflicts:
        print(
            "environment variables with two meanings:\n  " + "\n  ".join(conflicts), file=sys.stderr
        )
        return 1
    if args.check:
        current = args.output.read_text() if args.output.is_file() else ""
        if current == rendered:
            print(f"{args.output}: up to date")
            return 0
        diff = difflib.unified_diff(
            current.splitlines(),
            rendered.splitlines(),
            str(args.output),
            "rendered",
            lineterm="",
            n=1,
        )
        print("\n".join(list(diff)[:60]), file=sys.stderr)
        print(f"{args.output} is stale: run {GENERATOR}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(rendered)
    print(f"wrote {args.output}")
    return 0
