"""Durations in settings ('500ms', '10s', '1m', '2h'): one reading for every service."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")
MAX_DURATION_MS = 10 * 365 * 86_400_000  # ten years: more is a typo, not a setting
_UNIT_MS = {"ms": 1, "s": 1000, None: 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def parse_duration_ms(text: str, *, allow_zero: bool = False) -> int:
    """'500ms', '10s', '1m', '2h'; a bare number is seconds. ``allow_zero``: also '0' and 'off'
    (for settings where zero means "none", e.g. an allowed lateness or a timeout that is off)."""
    if allow_zero and text.strip().lower() in {"off", "none"}:
        return 0
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (e.g. 500ms, 10s, 1m, 2h)")
    value = float(match.group(1)) * _UNIT_MS[match.group(2)]
    if not value <= MAX_DURATION_MS:  # also infinity, from a number of hundreds of digits
        raise ValueError(f"duration too long: {text[:40]!r} (at most {MAX_DURATION_MS} ms)")
    if (value < 0 if allow_zero else value <= 0) or value != int(value):
        raise ValueError(f"duration must be a positive whole number of ms: {text!r}")
    return int(value)
