"""The connector's errors, all under the project's root (:class:`streamkit.errors.StackError`).

Each of the run-ending ones says why the connector stops; the loop logs it and exits 1, and a
restart (a fresh consumer and producer from the committed offsets) is the recovery for all of
them. :class:`PointError` is not run-ending: it sends one record to the dead-letter topic.
"""

from __future__ import annotations

from streamkit.errors import StackError


class PointError(StackError, ValueError):
    """A record that cannot become a valid point; ``reason`` is the dead-letter reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class WriteUnavailable(StackError, RuntimeError):
    """InfluxDB did not take the batch for a reason that is not the points' fault."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause = cause


class RewindFailed(StackError, RuntimeError):
    """Where to read again is unknown: exit non-zero; a restart reads from the committed offsets."""


class TransactionStuck(StackError, RuntimeError):
    """A transactional step kept failing: the producer is wedged; a restart fences it."""


class FencedOut(StackError, RuntimeError):
    """The producer was fenced (another instance with our transactional id): stop, don't fight."""


class ConsumerFailed(StackError, RuntimeError):
    """The consumer reported a fatal error: it delivers nothing more; a restart makes a new one."""
