"""The forwarder's pure parts: an event as an Alertmanager alert (one identity for an alert,
its repeats and its resolve), the board of latest events and its bound, and a record that is
no overload event (counted and skipped, never raised)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message

from alert_forwarder.alerts import Board, alert, iso
from alert_forwarder.config import ForwarderSettings
from alert_forwarder.forwarder import UNDECODABLE, Forwarder
from streamkit.wire import AvroCodec

NOW_MS = 1_800_000_000_000
HOLD_MS = 3_600_000


def event(status: str = "firing", thing: str = "M1", **changes: Any) -> dict[str, Any]:
    return {
        "thing": thing,
        "component": "C12",
        "rating_id": "abc",
        "status": status,
        "since_ms": 600_000,
        "cycle_start_ms": 600_000 if status == "firing" else 1_800_000,
        "cycle_end_ms": 1_200_000 if status == "firing" else 2_400_000,
        "why": "duty" if status == "firing" else "",
        "duty_pct": 100.0 if status == "firing" else 10.0,
        "duty_rating_pct": 40.0,
        "overload_ms": 40_000,
        "peak_w": 30_000.0,
        "rated_power_kw": 20.0,
        **changes,
    }


def test_an_alert_its_repeat_and_its_resolve_share_their_labels() -> None:
    fired, again = alert(event(), NOW_MS, HOLD_MS), alert(event(), NOW_MS + 30_000, HOLD_MS)
    resolved = alert(event("resolved"), NOW_MS + 60_000, HOLD_MS)
    assert fired["labels"] == again["labels"] == resolved["labels"]
    assert fired["labels"]["overload_since"] == iso(600_000)
    assert fired["annotations"]["event"] == resolved["annotations"]["event"] == "M1|C12|abc|600000"
    assert fired["startsAt"] == iso(600_000) and fired["endsAt"] == iso(NOW_MS + HOLD_MS)
    assert resolved["endsAt"] == iso(1_800_000)  # the resolving cycle, in the past: resolved
    assert "peak 150 %" in fired["annotations"]["description"]
    # a resolve from a cycle ahead of the clock ends now, not in the future
    ahead = alert(event("resolved", cycle_start_ms=NOW_MS + 10**9), NOW_MS, HOLD_MS)
    assert ahead["endsAt"] == iso(NOW_MS)


def test_the_board_keeps_each_components_latest_and_forgets_resolved_ones_first() -> None:
    board = Board(limit=2)
    board.put("M1|C12", event())
    board.put("M2|C12", event("resolved", thing="M2"))
    board.put("M3|C12", event(thing="M3"))  # over the limit: the resolved one goes
    assert list(board.latest) == ["M1|C12", "M3|C12"]
    board.put("M1|C12", event("resolved"))
    assert [e["thing"] for e in board.firing()] == ["M3"]
    board.put("M4|C12", event(thing="M4"))  # over again: M1's resolve goes, the firing stay
    assert [e["thing"] for e in board.firing()] == ["M3", "M4"]


def message(value: bytes | None) -> Message:
    return Message(topic="o", partition=0, offset=7, key=b"k", value=value, timestamp=(1, 0))


def test_a_record_that_is_no_overload_event_is_counted_and_skipped() -> None:
    forwarder = Forwarder(ForwarderSettings.from_sources(environ={}))
    before = UNDECODABLE._value.get()
    good = AvroCodec("overload").encode(event())
    codec = AvroCodec("overload")
    odd = [event(status="odd"), event(since_ms=2**62), event(rated_power_kw=0.0)]
    for bad in (None, b"", b"\x00\x01garbage", *map(codec.encode, odd)):
        forwarder.take(message(bad))
    assert UNDECODABLE._value.get() == before + 6 and not forwarder.board.latest
    forwarder.take(message(good))
    assert [e["status"] for e in forwarder.board.firing()] == ["firing"]
    forwarder.take(message(AvroCodec("overload").encode(event("resolved"))))
    assert not forwarder.board.firing() and list(forwarder.resolved) == ["M1|C12"]
