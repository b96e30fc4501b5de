"""The operation statistics as a keyed operator (``operators.contract``): a thing's records in,
each component's closed reference cycles out.

A key is a thing; its records of every quantity come in arrival order, and the two inputs of
each component (``PowerInputs``) are picked out by name, so components are found as they
arrive. A component's rating comes from the machine catalogue by the thing's name, which is
why the operator is bound to its key (:meth:`for_key`) before it runs.

The idle timer is per component, like the windows': a component whose inputs fell silent for
the idle timeout (processing time) has its last cycle emitted anyway, and a record behind
what was emitted then is handed back (``window_closed``). A timer due more than two idle
periods after the component's last records means nothing ran meanwhile (a stop, a crash), so
it is armed again instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

import numpy as np

from operators import reasons
from operators.codec import Reader, Writer
from operators.contract import KeyedOperator, due
from operators.records import Records
from operators.time import to_ms
from opstats.catalogue import Catalogue, Rating
from opstats.components import LEFT, PowerInputs
from opstats.cycles import CycleStats
from opstats.overload import OverloadEvent, judge
from opstats.serde import KIND, read_state, write_state
from opstats.signal import Basis, ComponentState, Late, SignalRules

#: Every component's state of one thing, by component.
StatsState = dict[str, ComponentState]


@dataclass(frozen=True)
class StatsConfig:
    """What the statistics are made of; durations typed, checked when built."""

    inputs: PowerInputs
    catalogue: Catalogue = Catalogue()
    cycle: timedelta = timedelta(minutes=10)
    max_hold: timedelta = timedelta(seconds=60)
    #: None: never hand back an input's records because the other went ahead
    partner_timeout: timedelta | None = timedelta(minutes=5)
    idle_timeout: timedelta = timedelta(0)
    #: a cycle with longer than this above the rated power is overloaded (opstats.overload);
    #: None: only its duty cycle above the duty rating overloads it
    overload_after: timedelta | None = timedelta(seconds=60)

    def rules(self) -> SignalRules:
        timeout = self.partner_timeout
        return SignalRules(
            to_ms(self.cycle, what="reference cycle"),
            to_ms(self.max_hold, what="maximum hold"),
            None if timeout is None else to_ms(timeout, what="partner timeout", allow_zero=True),
        )


@dataclass
class StatsStep:
    """What one call emitted: the records handed back (``reasons`` aligned with them) and the
    cycles closed, per component in time order."""

    late: Records
    reasons: list[str]
    cycles: list[CycleStats]
    #: what the statistics are of: the inputs' result function, e.g. mechanical_power
    power_name: str = "power"
    #: the alerts the cycles fired or resolved, in the cycles' order
    events: list[OverloadEvent] = field(default_factory=list)


class OperationStatistics(KeyedOperator[StatsState, StatsStep]):
    kind: ClassVar[str] = KIND

    def __init__(
        self, config: StatsConfig, max_future: timedelta | None = None, thing: str = ""
    ) -> None:
        self.config = config
        self.rules = config.rules()
        self.idle_ms = to_ms(config.idle_timeout, what="idle timeout", allow_zero=True)
        self.overload_ms = (
            None
            if config.overload_after is None
            else to_ms(config.overload_after, what="overload time", allow_zero=True)
        )
        self.max_future = max_future
        self.max_future_ms = (
            None if max_future is None else to_ms(max_future, what="max future", allow_zero=True)
        )
        self.thing = thing
        self._ratings: dict[str, Rating] = {}
        self._bound: dict[str, OperationStatistics] = {}

    def for_key(self, key: str) -> OperationStatistics:
        """The operator for one thing: its components' ratings are that thing's."""
        if key == self.thing:
            return self
        bound = self._bound.get(key)
        if bound is None:
            if len(self._bound) >= 65_536:  # a bound on memory, whatever the keys
                self._bound.clear()
            bound = self._bound[key] = OperationStatistics(self.config, self.max_future, key)
        return bound

    def rating(self, component: str) -> Rating:
        rating = self._ratings.get(component)
        if rating is None:
            if len(self._ratings) >= 4096:
                self._ratings.clear()
            rating = self._ratings[component] = self.config.catalogue.rating(self.thing, component)
        return rating

    def initial(self) -> StatsState:
        return {}

    def _component(self, state: StatsState, component: str) -> tuple[ComponentState, Basis]:
        """The component's state (afresh under a changed rating) and what it is computed with."""
        rating = self.rating(component)
        current = state.get(component)
        if current is None or current.rating_id != rating.rating_id:
            current = state[component] = ComponentState.fresh(rating)
        return current, Basis(self.rules, rating, self.config.inputs.power, component)

    def process(
        self, state: StatsState, batch: Records, now_ms: int
    ) -> tuple[StatsState, StatsStep]:
        late: list[tuple[str, Late]] = []
        cycles: list[CycleStats] = []
        events: list[OverloadEvent] = []
        times, values, ids = batch.event_time_ms, batch.value, batch.row_id
        future = (
            np.zeros(len(batch), bool)
            if self.max_future_ms is None
            else times > now_ms + self.max_future_ms
        )
        by_component: dict[str, list[tuple[int, int]]] = {}
        for component, side, rows in self.config.inputs.split(batch.quantity):
            by_component.setdefault(component, []).extend((int(r), side) for r in rows)
        for component in sorted(by_component):
            current, basis = self._component(state, component)
            for row, side in sorted(by_component[component]):
                t, v, row_id = int(times[row]), float(values[row]), str(ids[row])
                if future[row]:
                    late.append((component, Late(side, t, v, row_id, reasons.FUTURE_TIMESTAMP)))
                    continue
                refused = current.accept(self.rules, side, t, v, row_id)
                if refused is not None:
                    late.append((component, refused))
            handed: list[Late] = []
            closed = len(cycles)
            current.advance(basis, current.horizon(self.rules), cycles, handed)
            self._judge(current, cycles[closed:], events)
            late.extend((component, item) for item in handed)
            current.last_call_ms = now_ms
            current.deadline_ms = (
                now_ms + self.idle_ms if self.idle_ms and current.is_open() else None
            )
        return state, self._step(late, cycles, events)

    def _judge(
        self, current: ComponentState, closed: list[CycleStats], events: list[OverloadEvent]
    ) -> None:
        """The alerts of a component's newly closed cycles; its firing state goes on."""
        if closed:
            found, current.firing_since_ms = judge(
                closed, current.firing_since_ms, self.overload_ms
            )
            events.extend(found)

    def deadline(self, state: StatsState) -> int | None:
        return min(
            (s.deadline_ms for s in state.values() if s.deadline_ms is not None), default=None
        )

    def on_timer(self, state: StatsState, now_ms: int) -> tuple[StatsState, StatsStep | None]:
        late: list[tuple[str, Late]] = []
        cycles: list[CycleStats] = []
        events: list[OverloadEvent] = []
        for component in sorted(state):
            current = state[component]
            if not due(current.deadline_ms, now_ms):
                continue
            if now_ms - current.last_call_ms > 2 * self.idle_ms:
                current.last_call_ms, current.deadline_ms = now_ms, now_ms + self.idle_ms
                continue
            self._flush(state, component, cycles, late, events)
        return state, (self._step(late, cycles, events) if late or cycles else None)

    def finish(self, state: StatsState) -> tuple[StatsState, StatsStep]:
        late: list[tuple[str, Late]] = []
        cycles: list[CycleStats] = []
        events: list[OverloadEvent] = []
        for component in sorted(state):
            self._flush(state, component, cycles, late, events)
        return state, self._step(late, cycles, events)

    def _flush(
        self,
        state: StatsState,
        component: str,
        cycles: list[CycleStats],
        late: list[tuple[str, Late]],
        events: list[OverloadEvent],
    ) -> None:
        current, basis = self._component(state, component)
        handed: list[Late] = []
        closed = len(cycles)
        current.flush(basis, cycles, handed)
        self._judge(current, cycles[closed:], events)
        late.extend((component, item) for item in handed)
        current.deadline_ms = None

    def _step(
        self, late: list[tuple[str, Late]], cycles: list[CycleStats], events: list[OverloadEvent]
    ) -> StatsStep:
        inputs = self.config.inputs
        pattern = (inputs.left, inputs.right)
        records = Records.of(
            [pattern[item.side].quantity(component) for component, item in late],
            [item.time_ms for _, item in late],
            [item.value for _, item in late],
            [item.row_id for _, item in late],
        )
        return StatsStep(records, [item.reason for _, item in late], cycles, inputs.name, events)

    def write(self, state: StatsState, out: Writer) -> None:
        write_state(state, out)

    def read(self, data: Reader) -> StatsState:
        return read_state(data)


__all__ = ["LEFT", "OperationStatistics", "StatsConfig", "StatsState", "StatsStep"]
