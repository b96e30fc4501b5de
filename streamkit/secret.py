"""Passwords and tokens as a type that never prints its value.

A setting holding a secret is a :class:`Secret`: its ``repr``, ``str`` and format show a mask,
so a settings object logged, printed in a traceback or shown by a debugger gives nothing away.
The value is read only where it is handed to a client library, with :meth:`Secret.reveal`,
which makes every such place easy to find.
"""

from __future__ import annotations

from typing import Any, Final

MASK: Final = "***"


class Secret:
    """An immutable secret text. Equal to another :class:`Secret` of the same value (settings
    compare), never to a plain string (that comparison is almost always a leak in a test or a
    log line); falsy when empty, so ``if not settings.kafka_password`` keeps working."""

    __slots__ = ("_value",)

    def __init__(self, value: str | Secret = "") -> None:
        object.__setattr__(self, "_value", value.reveal() if isinstance(value, Secret) else value)

    def reveal(self) -> str:
        """The value itself: only for handing it to the client that logs in with it."""
        value: str = object.__getattribute__(self, "_value")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Secret is immutable")

    def __repr__(self) -> str:
        return f"Secret({MASK!r})" if self.reveal() else "Secret('')"

    def __str__(self) -> str:
        return MASK if self.reveal() else ""

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:
        return bool(self.reveal())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.reveal() == self.reveal()

    def __hash__(self) -> int:
        return hash((Secret, self.reveal()))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles (Spark ships settings to its workers) as the value: the worker needs it."""
        return (Secret, (self.reveal(),))
