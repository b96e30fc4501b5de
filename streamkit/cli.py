"""A program's front door, for every service and tool: how it names itself, how its
``--help`` reads, and the one place where the project's errors become exit codes.

Deep code raises typed errors (:mod:`streamkit.errors`), never ``SystemExit``: it cannot know
whether it runs in a service, a tool or a test. Only a program's ``main``, decorated with
:func:`entry_point`, turns an error into one line for the user and an exit code: 2 for a
configuration error (as argparse's own usage errors), 1 for most others (``exit_code`` on each
class). Standard library only, so the tools that run before anything is installed can use it.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

from streamkit.errors import ConfigError, StackError

P = ParamSpec("P")

log = logging.getLogger("streamkit.cli")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The module docstring as written, and every option's default in its help: a tool's own
    options show ``(default: X)`` unless they have none (None, off) or say it themselves; the
    settings' options end with their default and variable already (``default_note``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)"


def program_name(module: str) -> str:
    """How the user started us, for messages and ``--help``: the console script's name
    (``mds-bridge``) or ``python -m <module>``."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return script if script.startswith("mds-") else f"python -m {module}"


def exit_code(error: StackError, prog: str) -> int:
    """Say what went wrong in one line on stderr, and the exit code for it."""
    kind = "" if isinstance(error, ConfigError) else "error: "
    print(f"{prog}: {kind}{error}", file=sys.stderr, flush=True)
    if not isinstance(error, ConfigError):
        log.debug("stopped by an error", exc_info=error)
    return error.exit_code


def entry_point(module: str) -> Callable[[Callable[P, int]], Callable[P, int]]:
    """Decorate a program's ``main`` (``module``: what ``python -m`` runs): the project's
    errors become :func:`exit_code`'s one line and exit code instead of a traceback. Every
    console script and ``python -m`` goes through one; deep code only raises."""

    def decorate(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def run(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except StackError as error:
                return exit_code(error, program_name(module))

        return run

    return decorate
