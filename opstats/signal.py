"""One component's power signal, sample and hold, integrated into reference cycles.

Each input (e.g. speed and torque) holds its latest value for at most ``max_hold_ms`` after
its record; where both hold, the power is P = f(speed, torque), and elsewhere there is no
data. The signal is integrated piece by piece in time order, a piece ending at the next
record time, end of a hold or cycle boundary. A piece is added only once its end is certain:
once both inputs have passed it (the horizon), or once the input ahead is ``partner_timeout``
past it, which hands the other input's older records back instead of waiting for ever.

Records of an input are taken in their own order: one not newer than the input's last is late,
as in the join, so what is certain never changes and each cycle is emitted once, final.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from operators import reasons
from operators.time import END_TIME, NO_TIME
from opstats.catalogue import Rating
from opstats.components import LEFT, RIGHT, PowerFn
from opstats.cycles import CycleStats, OpenCycle, close

#: Later than every event: "no next event".
NEVER = math.inf


@dataclass(frozen=True)
class SignalRules:
    cycle_ms: int
    max_hold_ms: int
    #: None: wait for both inputs however far apart they are
    partner_timeout_ms: int | None


@dataclass(frozen=True)
class Basis:
    """What one component's figures are computed with: the rules, its rating, the power of its
    inputs, and its name (for the cycles it closes)."""

    rules: SignalRules
    rating: Rating
    power: PowerFn
    component: str


@dataclass
class Late:
    """A record handed back, with why."""

    side: int
    time_ms: int
    value: float
    row_id: str
    reason: str


@dataclass
class ComponentState:
    """Everything one component of a key remembers."""

    rating_id: str
    #: newest accepted record time and value per input (lateness, copies)
    last_t: list[int] = field(default_factory=lambda: [NO_TIME, NO_TIME])
    last_v: list[float] = field(default_factory=lambda: [math.nan, math.nan])
    #: accepted records not yet reached by the integration, per input, in time order
    pend_t: list[list[int]] = field(default_factory=lambda: [[], []])
    pend_v: list[list[float]] = field(default_factory=lambda: [[], []])
    pend_id: list[list[str]] = field(default_factory=lambda: [[], []])
    #: the value each input holds at the cursor (NO_TIME: none)
    held_t: list[int] = field(default_factory=lambda: [NO_TIME, NO_TIME])
    held_v: list[float] = field(default_factory=lambda: [math.nan, math.nan])
    #: everything before it is integrated; NaN power: no data from it on
    cursor: int = NO_TIME
    power_w: float = math.nan
    cycle: OpenCycle | None = None
    cumulative_ms: list[int] = field(default_factory=list)
    #: records before it fall in cycles an idle flush emitted
    flushed_until: int = NO_TIME
    #: processing time of the last call with records, and the idle timer
    last_call_ms: int = NO_TIME
    deadline_ms: int | None = None
    #: the start of the cycle whose overload alert fires now (NO_TIME: none; opstats.overload)
    firing_since_ms: int = NO_TIME

    @classmethod
    def fresh(cls, rating: Rating) -> ComponentState:
        return cls(rating.rating_id, cumulative_ms=[0] * len(rating.band_names))

    def horizon(self, rules: SignalRules) -> int:
        """Every record at or before it is known (or handed back when it comes)."""
        behind, ahead = min(self.last_t), max(self.last_t)
        if rules.partner_timeout_ms is not None and ahead != NO_TIME:
            behind = max(behind, ahead - rules.partner_timeout_ms)
        return behind

    def is_open(self) -> bool:
        """Anything an idle flush would still emit or drop."""
        return self.cycle is not None or any(self.pend_t) or any(t != NO_TIME for t in self.held_t)

    def accept(self, rules: SignalRules, side: int, t: int, v: float, row_id: str) -> Late | None:
        """One record of an input, in arrival order: taken, or handed back with why."""
        if not math.isfinite(v):
            return Late(side, t, v, row_id, reasons.INVALID_VALUE)
        last = self.last_t[side]
        if t <= last:
            same = t == last and v == self.last_v[side]
            return Late(side, t, v, row_id, reasons.DUPLICATE if same else reasons.BEHIND_WATERMARK)
        if t < self.flushed_until:
            return Late(side, t, v, row_id, reasons.WINDOW_CLOSED)
        if t <= self.horizon(rules):
            return Late(side, t, v, row_id, reasons.PARTNER_TIMEOUT)
        self.last_t[side], self.last_v[side] = t, v
        self.pend_t[side].append(t)
        self.pend_v[side].append(v)
        self.pend_id[side].append(row_id)
        return None

    def advance(self, basis: Basis, until: int, cycles: list[CycleStats], late: list[Late]) -> None:
        """Integrates every piece that ends at or before ``until``, closing the cycles that
        end there; records whose power is not finite or beyond the physical bound are handed
        back (their input keeps its previous value)."""
        rules, rating, power, component = basis.rules, basis.rating, basis.power, basis.component
        hold, length = rules.max_hold_ms, rules.cycle_ms
        edges, bound = rating.edges_w, rating.bound_w
        top = len(edges) - 1  # the overload band's index
        pend_t, held_t = self.pend_t, self.held_t
        nexts = [0, 0]
        while True:
            rec = min(
                pend_t[s][nexts[s]] if nexts[s] < len(pend_t[s]) else NEVER for s in (LEFT, RIGHT)
            )
            expiry = min(t + hold if t != NO_TIME else NEVER for t in held_t)
            has_data = not math.isnan(self.power_w)
            if self.cycle is not None:
                boundary: float = self.cycle.start_ms + length
            elif has_data:
                boundary = (self.cursor // length) * length + length
            else:
                boundary = NEVER
            event = min(rec, expiry, boundary)
            if event > until:
                break
            at = int(event)
            if has_data:
                if self.cycle is None:
                    start = (self.cursor // length) * length
                    self.cycle = OpenCycle(start, [0] * (top + 1))
                magnitude = abs(self.power_w)
                band = top
                if magnitude <= edges[-1]:
                    band = 0
                    while band < top - 1 and magnitude >= edges[band + 1]:
                        band += 1
                self.cycle.add(self.power_w, band, at - self.cursor)
            self.cursor = at
            if self.cycle is not None and at == self.cycle.start_ms + length:
                cycles.append(close(self.cycle, component, length, rating, self.cumulative_ms))
                self.cycle = None
            for s in (LEFT, RIGHT):
                if held_t[s] != NO_TIME and held_t[s] + hold <= at:
                    held_t[s], self.held_v[s] = NO_TIME, math.nan
                    self.power_w = math.nan  # the power holds no longer than either input
            if rec == at:
                self._apply(at, nexts, power, bound, late)
        for s in (LEFT, RIGHT):
            if nexts[s]:
                del (
                    self.pend_t[s][: nexts[s]],
                    self.pend_v[s][: nexts[s]],
                    self.pend_id[s][: nexts[s]],
                )

    def _apply(
        self, at: int, nexts: list[int], power: PowerFn, bound: float, late: list[Late]
    ) -> None:
        """The records at ``at`` become the held values and give the power, unless that power is
        no load but a fault: then they are handed back and the held values (and power) stay."""
        before = (list(self.held_t), list(self.held_v))
        applied = []
        for s in (LEFT, RIGHT):
            k = nexts[s]
            if k < len(self.pend_t[s]) and self.pend_t[s][k] == at:
                self.held_t[s], self.held_v[s] = at, self.pend_v[s][k]
                applied.append((s, k))
                nexts[s] = k + 1
        if NO_TIME in self.held_t:
            self.power_w = math.nan
            return
        value = float(power(self.held_v[LEFT], self.held_v[RIGHT]))
        if math.isfinite(value) and abs(value) <= bound:
            self.power_w = value
            return
        reason = reasons.INVALID_VALUE if not math.isfinite(value) else reasons.BEYOND_BOUND
        for s, k in applied:
            late.append(Late(s, at, self.pend_v[s][k], self.pend_id[s][k], reason))
        self.held_t[:], self.held_v[:] = before  # power_w is still that of these values

    def flush(self, basis: Basis, cycles: list[CycleStats], late: list[Late]) -> None:
        """As if the inputs had ended (the end of the stream, or an idle flush): everything is
        integrated and emitted; a record that comes later behind it is late."""
        self.advance(basis, END_TIME, cycles, late)
        self.flushed_until = max(self.flushed_until, self.cursor)
