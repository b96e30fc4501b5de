"""The events file as the README and docs/architecture.md describe it, read without the
project's parser: one JSON object per line (Python-dict style accepted), ``Thing``,
``Timestamp``, an optional ``id`` and numbers for every other key. A row the rules do not
accept is left out; which rows are refused and why is the services' business, tested there.

Only the standard library: a bug in ``streamkit.events`` must not be repeated here.
"""

from __future__ import annotations

import ast
import gzip
import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple, TypeGuard

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
#: The timestamp's unit by magnitude: below 1e11 seconds, 1e14 ms, 1e17 µs, else ns.
UNITS = ((10**11, Fraction(1000)), (10**14, Fraction(1)), (10**17, Fraction(1, 1000)))
NANOSECONDS = Fraction(1, 1_000_000)
META = {"Thing", "Timestamp", "id"}
#: InfluxDB stores int64 nanoseconds: a time beyond that, in ms, is refused at the door.
LAST_STORABLE_MS = (2**63 - 1) // 1_000_000


class SpecRow(NamedTuple):
    thing: str
    time_ms: int
    row_id: str
    quantities: tuple[tuple[str, float], ...]  # in the row's own order


class Measurement(NamedTuple):
    """One quantity of one row: what the bridge writes to the raw topic."""

    thing: str
    quantity: str
    time_ms: int
    value: float
    row_id: str


def to_ms(stamp: object) -> int | None:
    """Integer milliseconds by the magnitude rule, fractions floored, computed exactly on the
    number as written (1554096380.468 s is ...468 ms, though the nearest double is a hair below)."""
    if isinstance(stamp, str):
        text = stamp.strip()
        if text.removeprefix("-").isdigit() and text.isascii():
            stamp = int(text)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return (parsed - EPOCH) // MS
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float, Decimal)):
        return None
    if not isinstance(stamp, int) and not math.isfinite(stamp):
        return None
    # A fractional number is a double (RFC 8259): the decimal it stands for is the shortest one
    # that reads back as that double, which is the number as written up to 15 significant digits.
    exact = Fraction(stamp if isinstance(stamp, int) else Decimal(repr(float(stamp))))
    scale = next((unit for limit, unit in UNITS if abs(exact) < limit), NANOSECONDS)
    return math.floor(exact * scale)


def decode(line: bytes | str) -> dict | None:
    text = line.decode("utf-8") if isinstance(line, bytes) else line
    try:
        obj = json.loads(text, parse_float=Decimal)
    except ValueError:
        try:
            obj = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            return None
    return obj if isinstance(obj, dict) else None


def is_name(name: object, thing: bool) -> TypeGuard[str]:
    """The naming rule (docs/architecture.md, "Names"): 1-128 printable characters, no space at
    either end, no ``|`` or ``\\``; a Thing also no ``/``, ``+`` or ``#``."""
    forbidden = set("|\\/+#" if thing else "|\\")
    return (
        type(name) is str
        and 0 < len(name) <= 128
        and name.isprintable()
        and name == name.strip(" ")
        and not forbidden & set(name)
    )


def spec_row(obj: dict) -> SpecRow | None:
    """The row an object makes, or None if the rules refuse it."""
    thing, time_ms = obj.get("Thing"), to_ms(obj.get("Timestamp"))
    if not is_name(thing, thing=True) or time_ms is None:
        return None
    quantities = []
    for name, value in obj.items():
        if name in META:
            continue
        if not is_name(name, thing=False):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            return None
        try:
            number = float(value)
        except OverflowError:  # an integer beyond every float
            return None
        if not math.isfinite(number):
            return None
        quantities.append((name, number))
    row_id = obj.get("id", "")
    return (
        SpecRow(
            thing, time_ms, row_id if isinstance(row_id, str) else str(row_id), tuple(quantities)
        )
        if quantities
        else None
    )


def lines_of(path: Path) -> list[bytes]:
    """The file's lines, gunzipped when it is gzip; a byte-order mark and CRLF ends dropped."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").split(b"\n")


def file_rows(path: Path) -> list[SpecRow]:
    """The rows the bridge passes on of a JSON-lines file (or of a JSON array of objects), in file
    order: the rows the rules accept, at times InfluxDB can store."""
    lines = lines_of(path)
    whole = b"\n".join(lines).strip()
    if whole.startswith(b"["):
        objects = json.loads(whole, parse_float=Decimal)
    else:
        objects = [decode(line) for line in lines if line.strip()]
    rows = (spec_row(obj) for obj in objects if isinstance(obj, dict))
    return [row for row in rows if row is not None and abs(row.time_ms) <= LAST_STORABLE_MS]


def event_time_order(rows: list[SpecRow]) -> list[SpecRow]:
    """The simulator's default replay order: by event time, ties in file order."""
    return sorted(rows, key=lambda row: row.time_ms)


def measurements(rows: list[SpecRow]) -> list[Measurement]:
    """Each row split into its quantities, in order; a later copy of the same (thing, quantity,
    time), a re-sent row, adds nothing (the first copy is the record)."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for row in rows:
        for quantity, value in row.quantities:
            if (row.thing, quantity, row.time_ms) not in seen:
                seen.add((row.thing, quantity, row.time_ms))
                out.append(Measurement(row.thing, quantity, row.time_ms, value, row.row_id))
    return out
