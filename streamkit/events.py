"""Parsing and validating one events.json row: the contract between the simulator, the bridge
and anything else that reads machine snapshots.

A row is a JSON object (Python-dict style with single quotes is accepted too) with ``Thing``
(a name, streamkit.identifiers), ``Timestamp`` and optionally ``id`` (any UTF-8 text); every
other key is a quantity, named by the same rule, whose value must be a finite number.
Anything else is rejected with a reason instead of raising, so callers can count, dead-letter
and carry on.

Timestamp rule (one rule, documented in docs/simulator.md): an integer or float, or a string of
digits, is read by magnitude: below 1e11 seconds, below 1e14 milliseconds, below 1e17
microseconds, otherwise nanoseconds; any other string must be ISO-8601 (a missing offset
means UTC). The result is integer milliseconds since the epoch, fractions truncated toward
negative infinity.
"""

from __future__ import annotations

import ast
import json
import math
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from streamkit.errors import RowError
from streamkit.identifiers import BAD_QUANTITY_NAME, BAD_THING, quantity_problem, thing_problem

META_FIELDS = ("Thing", "Timestamp", "id")


@dataclass(frozen=True, slots=True)
class Row:
    thing: str
    timestamp_ms: int
    row_id: str
    quantities: dict[str, float]


#: More digits than any nanosecond timestamp InfluxDB can store has (19): refused before int()
#: does quadratic work on them.
MAX_TIMESTAMP_DIGITS = 30


def timestamp_to_ms(value: object) -> int:
    if isinstance(value, bool):
        raise RowError(
            "bad_timestamp", f"Timestamp must be a number or ISO-8601 string, not {value!r}"
        )
    if isinstance(value, str):
        text = value.strip()
        digits = text.removeprefix("-")
        if digits.isascii() and digits.isdigit():  # not "²" or other Unicode digits int() refuses
            if len(digits) > MAX_TIMESTAMP_DIGITS:
                raise RowError(
                    "bad_timestamp",
                    f"Timestamp has {len(digits)} digits (at most {MAX_TIMESTAMP_DIGITS})",
                )
            value = int(text)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                raise RowError(
                    "bad_timestamp", f"Timestamp {value!r} is neither a number nor ISO-8601"
                ) from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            delta = parsed - datetime(1970, 1, 1, tzinfo=UTC)
            return (delta.days * 86_400_000) + (delta.seconds * 1000) + (delta.microseconds // 1000)
    if isinstance(value, int):
        magnitude = abs(value)
        if magnitude < 10**11:
            return value * 1000
        if magnitude < 10**14:
            return value
        if magnitude < 10**17:
            return value // 1000
        return value // 1_000_000
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RowError("bad_timestamp", f"Timestamp {value!r} is not finite")
        # The number as written, not its binary neighbour: 543635725.874 s is the float
        # 543635725.87399995..., and float arithmetic put one such time in a hundred a
        # millisecond early. repr gives back the shortest decimal, which is what the file said.
        written = Decimal(repr(value))
        written_magnitude = abs(written)
        scale = (
            1000
            if written_magnitude < 10**11
            else 1
            if written_magnitude < 10**14
            else Decimal("0.001")
            if written_magnitude < 10**17
            else Decimal("0.000001")
        )
        return math.floor(written * scale)
    raise RowError(
        "bad_timestamp",
        f"Timestamp must be a number or ISO-8601 string, not {type(value).__name__}",
    )


#: What InfluxDB can store (int64 nanoseconds since the epoch, 1677-09-21 to 2262-04-11), in ms.
MIN_TIME_MS = -9_223_372_036_854
MAX_TIME_MS = 9_223_372_036_854


def check_event_time(timestamp_ms: int, now_ms: int, max_future_ms: int) -> None:
    """A clock we refuse to trust: outside what every stage can store, or further ahead of our
    own wall clock than ``max_future_ms``. One such record would otherwise move the event time
    of its key for good (everything after it would be late)."""
    if not MIN_TIME_MS <= timestamp_ms <= MAX_TIME_MS:
        raise RowError(
            "timestamp_out_of_range",
            f"Timestamp {timestamp_ms} ms is outside what can be stored "
            f"({MIN_TIME_MS}..{MAX_TIME_MS} ms)",
        )
    if timestamp_ms > now_ms + max_future_ms:
        raise RowError(
            "future_timestamp",
            f"Timestamp {timestamp_ms} ms is {timestamp_ms - now_ms} ms ahead of "
            f"our clock (at most {max_future_ms} ms allowed)",
        )


#: The dead-letter reason of a row whose Thing is not its MQTT topic's (MQTT_MACHINE_IDENTITIES).
THING_MISMATCH = "thing_mismatch"


def check_topic_thing(topic: str, thing: str) -> None:
    """The row's Thing must be the one its topic names, the topic's last level
    (``<prefix>/<Thing>``, ``<prefix>/<shard>/<Thing>``): with an MQTT user per machine that is
    the user the broker let publish there, so a machine cannot speak for another one."""
    named = topic.rpartition("/")[2]
    if named != thing:
        raise RowError(
            THING_MISMATCH,
            f"Thing {thing[:40]!r} came on the topic of Thing {named[:40]!r} ({topic[:120]!r})",
        )


def decode_object(payload: bytes | bytearray | str) -> dict:
    """JSON first (the normal case, fast); Python-dict style as a fallback."""
    text = payload if isinstance(payload, str) else payload.decode("utf-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        try:
            with warnings.catch_warnings():  # odd literals warn (SyntaxWarning): noise per message
                warnings.simplefilter("ignore")
                obj = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            raise RowError("not_json", "payload is neither JSON nor a Python-style dict") from None
    except RecursionError:
        raise RowError("too_deep", "payload is nested deeper than the JSON parser goes") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise RowError("bad_number", str(exc)[:200]) from None
    if not isinstance(obj, dict):
        raise RowError("not_object", f"payload is a JSON {type(obj).__name__}, not an object")
    return obj


def _check_text(field: str, text: str) -> None:
    """Every text goes into Avro and line protocol as UTF-8: a lone surrogate (valid in JSON's
    escapes, not in UTF-8) must be refused here, not fail an encoder downstream."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RowError("not_utf8", f"{field} holds a character UTF-8 cannot encode") from None


def validate(obj: dict) -> Row:
    if "Thing" not in obj:
        raise RowError("missing_thing", "Thing is missing")
    thing = obj["Thing"]
    problem = thing_problem(thing)
    if problem is not None:
        raise RowError(BAD_THING, problem)
    if "Timestamp" not in obj:
        raise RowError("missing_timestamp", "Timestamp is missing")
    timestamp_ms = timestamp_to_ms(obj["Timestamp"])
    row_id = obj.get("id", "")
    if not isinstance(row_id, str):
        row_id = str(row_id)
    _check_text("id", row_id)
    quantities: dict[str, float] = {}
    for name, value in obj.items():
        if name in META_FIELDS:
            continue
        problem = quantity_problem(name)  # not printable also covers lone surrogates (not UTF-8)
        if problem is not None:
            raise RowError(BAD_QUANTITY_NAME, problem)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RowError(
                "bad_quantity", f"quantity {name[:40]!r} is not a number: {repr(value)[:40]}"
            )
        try:
            number = float(value)
        except OverflowError:
            raise RowError(
                "bad_quantity", f"quantity {name[:40]!r} is too large for a float"
            ) from None
        if not math.isfinite(number):
            raise RowError("bad_quantity", f"quantity {name[:40]!r} is not finite: {value!r}")
        quantities[name] = number
    if not quantities:
        raise RowError("no_quantities", "row holds no quantity")
    return Row(thing, timestamp_ms, row_id, quantities)


def parse_row(payload: bytes | bytearray | str) -> Row:
    """Decode and validate; raises RowError with a reason code. Bytes of either kind: paho
    types an MQTT payload as ``bytes | bytearray``."""
    return read_row(payload)[1]


def read_row(payload: bytes | bytearray | str) -> tuple[dict, Row]:
    """The decoded object and its validated row. Untrusted bytes: nothing but RowError leaves."""
    try:
        obj = decode_object(payload)
        return obj, validate(obj)
    except UnicodeDecodeError:
        raise RowError("not_utf8", "payload is not UTF-8") from None
    except RowError:
        raise
    except Exception as exc:  # an input class nobody thought of: still a dead letter, never a crash
        raise RowError("unprocessable", f"{type(exc).__name__}: {str(exc)[:200]}") from None
