"""The project's errors: one root, :class:`StackError`, and the core's own kinds.

Every package with errors of its own keeps them in its ``errors.py``, each a subclass of the
root, so a caller can catch "anything this project refused" in one ``except`` and a start-up
(:func:`streamkit.service.exit_code`) can turn any of them into an exit code and one line for
the user, instead of a traceback or a ``SystemExit`` raised from deep inside. Where an error is
also one of Python's own kinds (a bad value, a missing key, a timeout), it subclasses that too,
so code that catches the builtin keeps working.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

#: Exit codes a start-up gives the errors (``exit_code`` on each class).
EXIT_FAILURE = 1
#: A usage or configuration error, as argparse's own.
EXIT_USAGE = 2


class StackError(Exception):
    """The root: something this project refused or could not do; ``str()`` says what and,
    where there is one, what to do about it."""

    exit_code = EXIT_FAILURE


class ConfigError(StackError, ValueError):
    """A setting that cannot be used. ``variable`` names it as the user wrote it (an
    environment variable or an option), so the message points at the one thing to change."""

    exit_code = EXIT_USAGE

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"configuration error: {variable}: {problem}")
        self.variable = variable
        self.problem = problem


class TimedOut(StackError, TimeoutError):
    """A wait that ran out (:class:`streamkit.deadline.Deadline`); the message names what was
    awaited."""


class TopicMissing(TimedOut, LookupError):
    """A Kafka topic that does not exist (or not within the wait): the topics are not
    provisioned, which ``mds-topics`` (``python -m stacktools.stack.topics``) does."""


class MqttConnectError(StackError, RuntimeError):
    """No MQTT connection: ``reason`` is the broker's CONNACK reason code when it refused us
    (e.g. "Not authorized"), None when no CONNACK came."""

    def __init__(self, message: str, reason: mqtt.ReasonCode | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class RowError(StackError, ValueError):
    """A row that cannot be used; ``reason`` is a short machine-friendly code (the dead-letter
    reason), ``args[0]`` the detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class EventsFileError(StackError):
    """The file cannot be replayed at all. Not a ValueError, so that no caller mistakes it for
    one bad row or a usage error: ``str()`` is the one line to show. Exit 2: the file given
    is the user's to fix."""

    exit_code = EXIT_USAGE

    def __init__(self, path: Path, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path, self.cause = path, cause
