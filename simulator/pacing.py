"""When to send the next row: as fast as possible, at a fixed rate, or at N x event time."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Pacer:
    rows_per_s: float = 0.0  # > 0: fixed rate
    speed_factor: float = 0.0  # > 0: event time replayed N times faster than real time
    #: (wall clock, event time) of the first row: the pace counts from there
    _start: tuple[float, int] | None = None
    _sent: int = 0

    def wait(self, event_time_ms: int) -> None:
        """Sleep until this row is due. Sleeps in one piece: rows are sent in bursts between
        sleeps, which keeps the rate exact without a syscall per row."""
        now = time.perf_counter()
        if self._start is None:
            self._start = (now, event_time_ms)
        start_wall, start_event_ms = self._start
        if self.rows_per_s > 0:
            due = start_wall + self._sent / self.rows_per_s
        elif self.speed_factor > 0:
            due = start_wall + max(0, event_time_ms - start_event_ms) / 1000.0 / self.speed_factor
        else:
            due = now
        self._sent += 1
        if due - now > 0.002:
            time.sleep(due - now)
