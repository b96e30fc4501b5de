"""A stand-in for Spark's GroupState with Spark's rules, to run the jobs' state functions
without Spark: a call that sets no timeout clears the key's timer, and a timed-out call comes
without rows."""

from __future__ import annotations

NO_DEADLINE = 0


class FakeGroupState:
    def __init__(self, value: tuple | None, now_ms: int, timed_out: bool = False) -> None:
        self.value = value
        self.now_ms = now_ms
        self.hasTimedOut = timed_out
        self.deadline_ms = NO_DEADLINE

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple | None:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def getCurrentProcessingTimeMs(self) -> int:
        return self.now_ms

    def setTimeoutDuration(self, duration_ms: int) -> None:
        self.deadline_ms = self.now_ms + int(duration_ms)
