"""Overload events: a component's closed cycles judged against its rating, as alerts that fire
and resolve.

A cycle is overloaded when its duty cycle is above the component's duty rating, or when the
drive spent longer than the overload time above its rated power. The first overloaded cycle
after one that was not *fires* an event; the first cycle back under *resolves* it. Both carry
the identity of the firing (its cycle's start), so an alert and its resolve pair up, and
overloaded cycles in between add nothing. Decided on closed cycles only, in their order, so the
events are as exact as the cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.time import NO_TIME
from opstats.cycles import CycleStats

FIRING, RESOLVED = "firing", "resolved"


@dataclass(frozen=True)
class OverloadEvent:
    """An alert of one component: fired by ``cycle`` or resolved by it; ``since_ms`` is the
    start of the cycle that fired (the alert's identity with thing, component and rating)."""

    status: str
    since_ms: int
    cycle: CycleStats
    #: why it fired: "duty", "overload" or "duty+overload" (empty for a resolve)
    why: str


def why_overloaded(cycle: CycleStats, overload_after_ms: int | None) -> str:
    """Why a cycle is overloaded: duty (above the duty rating), overload (longer than the
    overload time above rated), both joined by "+"; empty: it is not."""
    reasons = []
    if cycle.duty_exceeded:
        reasons.append("duty")
    if overload_after_ms is not None and cycle.overload_ms > overload_after_ms:
        reasons.append("overload")
    return "+".join(reasons)


def judge(
    cycles: list[CycleStats], firing_since_ms: int, overload_after_ms: int | None
) -> tuple[list[OverloadEvent], int]:
    """The events of one component's cycles (in time order) and whether it fires after them:
    the start of the firing cycle, or NO_TIME. ``overload_after_ms`` None: the duty rating
    alone decides."""
    events = []
    for cycle in cycles:
        why = why_overloaded(cycle, overload_after_ms)
        if why and firing_since_ms == NO_TIME:
            firing_since_ms = cycle.start_ms
            events.append(OverloadEvent(FIRING, firing_since_ms, cycle, why))
        elif not why and firing_since_ms != NO_TIME:
            events.append(OverloadEvent(RESOLVED, firing_since_ms, cycle, ""))
            firing_since_ms = NO_TIME
    return events, firing_since_ms
