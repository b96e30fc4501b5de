"""Errors of the operation statistics, under the project's root
(:class:`streamkit.errors.StackError`)."""

from __future__ import annotations

from pathlib import Path

from streamkit.errors import EXIT_USAGE, StackError


class CatalogueError(StackError, ValueError):
    """A machine catalogue that cannot be used. The message names the file, the line and the
    field, so the one thing to mend is on the first line the user reads; a start-up exits 2
    with it, as for any other bad setting."""

    exit_code = EXIT_USAGE

    def __init__(self, path: Path | str, line: int | None, field: str, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"machine catalogue {where}: {field}: {problem}")
        self.path = str(path)
        self.line = line
        self.field = field
        self.problem = problem
