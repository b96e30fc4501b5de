"""Deadlines, waits and back-off: every bounded wait in the project goes through here, so a
wait that runs out always fails the same way (:class:`TimedOut`, naming what was awaited)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from streamkit.errors import TimedOut

__all__ = ["Backoff", "Deadline", "TimedOut", "wait_until"]  # TimedOut: streamkit.errors

T = TypeVar("T")


class Deadline:
    """A point in monotonic time; ``Deadline(None)`` never expires."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        return float("inf") if self.end is None else max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, but never past the deadline."""
        time.sleep(max(0.0, min(seconds, self.remaining())))

    def check(self, what: str) -> None:
        if self.expired():
            raise TimedOut(f"{what}: not within {self.seconds:g} s")


def wait_until(
    predicate: Callable[[], T], timeout_s: float, what: str, *, interval_s: float = 0.1
) -> T:
    """Call ``predicate`` until it returns something truthy and return that; :class:`TimedOut`
    after ``timeout_s``. The predicate may raise to give up early (a process that died)."""
    deadline = Deadline(timeout_s)
    while True:
        result = predicate()
        if result:
            return result
        deadline.check(what)
        deadline.sleep(interval_s)


class Backoff:
    """Exponential back-off between retries: ``initial_s``, doubling up to ``max_s``."""

    def __init__(self, initial_s: float = 0.1, max_s: float = 5.0, factor: float = 2.0) -> None:
        self.initial_s, self.max_s, self.factor = initial_s, max_s, factor
        self.attempts = 0

    def next_delay(self) -> float:
        delay = min(self.max_s, self.initial_s * self.factor**self.attempts)
        self.attempts += 1
        return delay

    def sleep(self, deadline: Deadline | None = None) -> None:
        delay = self.next_delay()
        if deadline is None:
            time.sleep(delay)
        else:
            deadline.sleep(delay)

    def reset(self) -> None:
        self.attempts = 0
