"""Overload events as Alertmanager alerts, and the latest event of each component.

An alert's labels are its identity in Alertmanager: thing, component, rating and the start of
the cycle that fired it. Its resolve carries the same labels, and so does every repeat of a
firing alert, so a repeat refreshes the alert instead of raising another.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

ALERTNAME = "ComponentOverload"
FIRING, RESOLVED = "firing", "resolved"


def iso(ms: int) -> str:
    """RFC 3339 in UTC, as Alertmanager's API takes times."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def identity(event: dict[str, Any]) -> str:
    """thing|component|rating|firing cycle start: the same for an alert and its resolve."""
    return f"{event['thing']}|{event['component']}|{event['rating_id']}|{event['since_ms']}"


def labels(event: dict[str, Any]) -> dict[str, str]:
    return {
        "alertname": ALERTNAME,
        "severity": "warning",
        "thing": event["thing"],
        "component": event["component"],
        "rating": event["rating_id"],
        "overload_since": iso(event["since_ms"]),
    }


def alert(event: dict[str, Any], now_ms: int, hold_ms: int) -> dict[str, Any]:
    """The alert to post for the component's latest event: firing until ``hold_ms`` from now,
    or resolved at the cycle that resolved it (never later than now)."""
    rated_w = event["rated_power_kw"] * 1000.0
    firing = event["status"] == FIRING
    ends_ms = now_ms + hold_ms if firing else min(event["cycle_start_ms"], now_ms)
    return {
        "labels": labels(event),
        "annotations": {
            "summary": f"{event['thing']} {event['component']} overloaded ({event['why']})"
            if firing
            else f"{event['thing']} {event['component']} back under its rating",
            "description": (
                f"cycle from {iso(event['cycle_start_ms'])}: duty cycle "
                f"{event['duty_pct']:.1f} % (rating {event['duty_rating_pct']:.0f} %), "
                f"{event['overload_ms'] / 1000:.0f} s above the rated "
                f"{event['rated_power_kw']:g} kW, peak {100 * event['peak_w'] / rated_w:.0f} %"
            ),
            "event": identity(event),
        },
        "startsAt": iso(event["since_ms"]),
        "endsAt": iso(max(ends_ms, event["since_ms"] + 1)),
    }


class Board:
    """The latest event of each component (thing|component), as the compacted topic holds it,
    at most ``limit`` of them: resolved ones are forgotten first, oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.latest: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def put(self, key: str, event: dict[str, Any]) -> None:
        self.latest.pop(key, None)
        self.latest[key] = event
        while len(self.latest) > self.limit:
            resolved = next((k for k, e in self.latest.items() if e["status"] != FIRING), None)
            self.latest.pop(resolved if resolved is not None else next(iter(self.latest)))

    def firing(self) -> list[dict[str, Any]]:
        return [e for e in self.latest.values() if e["status"] == FIRING]
