"""Errors of the operators' floor."""

from __future__ import annotations


class StateFormatError(ValueError):
    """Bytes that are not a state snapshot this release can read (wrong kind, cut short)."""


class StateVersionError(StateFormatError):
    """A snapshot written by a newer release: its layout is unknown here, so it is refused
    rather than guessed at (a state read wrongly would corrupt every later output)."""
