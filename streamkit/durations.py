"""Durations in settings ('500ms', '10s', '1m', '2h', '7d'): one reading for every service.

Settings hold durations as :class:`~datetime.timedelta`, parsed and checked when they load
(:func:`parse_duration`), so a typo fails the start with the variable's name instead of
failing, or being read differently, where the value is first used. :func:`parse_duration_ms`
is the same grammar for the window specs, which stay text because one setting lists several.
"""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
MAX_DURATION_MS = 10 * 365 * 86_400_000  # ten years: more is a typo, not a setting
#: The units of the grammar, in milliseconds.
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
#: How :func:`format_duration` writes a duration: the largest unit that divides it.
_FORMAT_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def is_bare_number(text: str) -> bool:
    """A number without a unit ('5000'): what the settings that once counted in one unit were
    given, read in that unit for one more release (:mod:`streamkit.config`)."""
    match = _DURATION.match(text)
    return match is not None and match.group(2) is None


def parse_duration_ms(text: str, *, allow_zero: bool = False, bare_unit: str = "s") -> int:
    """'500ms', '10s', '1m', '2h', '7d'; a bare number is in ``bare_unit`` (seconds unless a
    setting still reads its old unit). ``allow_zero``: also '0' and 'off' (for settings where
    zero means "none", e.g. an allowed lateness or a timeout that is off)."""
    if allow_zero and text.strip().lower() in {"off", "none"}:
        return 0
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (e.g. 500ms, 10s, 1m, 2h)")
    value = float(match.group(1)) * _UNIT_MS[match.group(2) or bare_unit]
    if not value <= MAX_DURATION_MS:  # also infinity, from a number of hundreds of digits
        raise ValueError(f"duration too long: {text[:40]!r} (at most {MAX_DURATION_MS} ms)")
    if (value < 0 if allow_zero else value <= 0) or value != int(value):
        raise ValueError(f"duration must be a positive whole number of ms: {text!r}")
    return int(value)


def parse_duration(text: str, *, allow_zero: bool = False, bare_unit: str = "s") -> timedelta:
    """:func:`parse_duration_ms` as a :class:`~datetime.timedelta` (what settings hold)."""
    return timedelta(
        milliseconds=parse_duration_ms(text, allow_zero=allow_zero, bare_unit=bare_unit)
    )


def duration_ms(duration: timedelta) -> int:
    """Whole milliseconds, the unit the operators and Kafka clients count in."""
    return round(duration.total_seconds() * 1000)


def format_duration(duration: timedelta) -> str:
    """The inverse of :func:`parse_duration` in the largest unit that divides it ('1h', '90s',
    '250ms'); 'off' for zero, as settings that allow zero read it."""
    ms = duration_ms(duration)
    if ms == 0:
        return "off"
    for unit, size in _FORMAT_UNITS:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
