"""Errors of the operators' floor, under the project's root
(:class:`streamkit.errors.StackError`); each is a ValueError too, so code that catches the
builtin keeps working."""

from __future__ import annotations

from streamkit.errors import StackError


class StateFormatError(StackError, ValueError):
    """Bytes that are not a state snapshot this release can read (wrong kind, cut short)."""


class StateVersionError(StateFormatError):
    """A snapshot written by a newer release: its layout is unknown here, so it is refused
    rather than guessed at (a state read wrongly would corrupt every later output)."""
