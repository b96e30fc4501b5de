"""Grafana's interval text: parsing ('5s'), printing ('1m') and rounding to "nice" intervals.

Not the settings' durations (:mod:`streamkit.durations`): Grafana's grammar has days, weeks
and years and no bare numbers, and its printing truncates to the largest whole unit, which is
what the checker must reproduce to fill a panel's query as Grafana does. Kept apart because
both the loader (a datasource's ``timeInterval``) and the macro filler (``$__interval``) need
it, and neither should depend on the other.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w|y)\s*$")
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}
_YEAR_MS = _UNIT_MS["y"]
#: Grafana's interval rounding (rangeutil.roundInterval) as (upper bound, rounded) pairs in ms:
#: a raw interval below the bound becomes the rounded value, so intervals are "nice" numbers.
_ROUNDING_MS: tuple[tuple[int, int], ...] = (
    (15, 10),
    (35, 20),
    (75, 50),
    (150, 100),
    (350, 200),
    (750, 500),
    (1_500, 1_000),
    (3_500, 2_000),
    (7_500, 5_000),
    (12_500, 10_000),
    (17_500, 15_000),
    (25_000, 20_000),
    (45_000, 30_000),
    (90_000, 60_000),
    (210_000, 120_000),
    (450_000, 300_000),
    (750_000, 600_000),
    (1_050_000, 900_000),
    (1_500_000, 1_200_000),
    (2_700_000, 1_800_000),
    (5_400_000, 3_600_000),
    (9_000_000, 7_200_000),
    (16_200_000, 10_800_000),
    (32_400_000, 21_600_000),
    (86_400_000, 43_200_000),
    (604_800_000, 86_400_000),
    (1_814_400_000, 604_800_000),
    (3_628_800_000, 2_592_000_000),
)


def parse_interval_ms(text: str) -> int:
    """'5s' -> 5000: Grafana's interval strings (ms, s, m, h, d, w, y)."""
    match = _DURATION.match(text or "")
    if not match:
        raise ValueError(f"not a Grafana interval: {text!r} (e.g. 10s, 1m, 1d)")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


def format_interval(ms: int) -> str:
    """Grafana's secondsToHms: the largest whole unit, truncated ('90s' -> '1m',
    '1500ms' -> '1s')."""
    for unit in ("y", "d", "h", "m", "s", "ms"):
        size = _UNIT_MS[unit]
        if ms >= size:
            return f"{ms // size}{unit}"
    return "1ms"  # Grafana says "less than a millisecond"; no query language accepts that


def round_interval_ms(interval_ms: float) -> int:
    """Grafana's rounding of a raw interval to a 'nice' one (10ms, 20ms, ... 1m, 2m, 5m, ... 1y)."""
    for bound, rounded in _ROUNDING_MS:
        if interval_ms < bound:
            return rounded
    return _YEAR_MS
