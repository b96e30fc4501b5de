"""The windows as a keyed operator (``operators.contract``), with the idle timer.

A key is one (thing, quantity); a batch its records in arrival order. Every call with data
re-arms the key's idle timer while it has open windows; when the timer is due, the key's open
windows are flushed (``windowing.windows.flush``). A timer due more than two idle periods after
the key's last call means nothing ran meanwhile (a stop, a crash), not that the key fell
silent: the key had no chance to speak, so the timer is armed again instead.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import ClassVar

from operators.codec import Reader, Writer
from operators.contract import KeyedOperator
from operators.records import Records
from operators.time import to_ms
from windowing.serde import KIND, read_state, write_state
from windowing.windows import Step, WindowRules, WindowState, flush, process


class WindowOperator(KeyedOperator[WindowState, Step]):
    kind: ClassVar[str] = KIND

    def __init__(self, rules: WindowRules, idle_timeout: timedelta = timedelta(0)) -> None:
        self.rules = rules
        #: 0: no idle timer
        self.idle_timeout_ms = to_ms(idle_timeout, what="idle timeout", allow_zero=True)

    def initial(self) -> WindowState:
        return WindowState()

    def process(self, state: WindowState, batch: Records, now_ms: int) -> tuple[WindowState, Step]:
        step = process(
            self.rules, state, batch.event_time_ms, batch.value, batch.row_id.tolist(), now_ms
        )
        idle = self.idle_timeout_ms
        armed = now_ms + idle if idle and step.state.has_open_windows else None
        step.state = replace(step.state, last_batch_ms=now_ms, deadline_ms=armed)
        return step.state, step

    def deadline(self, state: WindowState) -> int | None:
        return state.deadline_ms

    def on_timer(self, state: WindowState, now_ms: int) -> tuple[WindowState, Step | None]:
        idle = self.idle_timeout_ms
        if now_ms - state.last_batch_ms > 2 * idle:
            return replace(state, last_batch_ms=now_ms, deadline_ms=now_ms + idle), None
        step = flush(self.rules, state)
        step.state = replace(step.state, last_batch_ms=now_ms, deadline_ms=None)
        return step.state, step

    def finish(self, state: WindowState) -> tuple[WindowState, Step]:
        step = flush(self.rules, state)
        step.state = replace(step.state, deadline_ms=None)
        return step.state, step

    def write(self, state: WindowState, out: Writer) -> None:
        write_state(state, out)

    def read(self, data: Reader) -> WindowState:
        return read_state(data)
