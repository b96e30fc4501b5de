"""Event time as the operators see it: int64 milliseconds, two sentinels, typed durations.

Both sentinels sit at the ends of int64 so that every real event time compares between them
and numpy keeps them in an int64 array without a mask: ``NO_TIME`` is "no time yet / never"
(a clock before its first record), ``END_TIME`` is the watermark of a finished stream, at which
everything pending is certain.
"""

from __future__ import annotations

from datetime import timedelta

#: "No time yet" / "never": below every event time.
NO_TIME: int = -(2**63)
#: The watermark of a finished stream: above every event time, so everything is certain.
END_TIME: int = 2**63 - 1

_MS = timedelta(milliseconds=1)


def ms(amount: int) -> timedelta:
    """``amount`` milliseconds as a duration."""
    return timedelta(milliseconds=amount)


def to_ms(duration: timedelta, *, what: str = "duration", allow_zero: bool = False) -> int:
    """A duration as whole milliseconds; a negative one, a zero one (unless ``allow_zero``) or
    one with a fraction of a millisecond is refused: event times are whole milliseconds."""
    if not isinstance(duration, timedelta):
        raise TypeError(f"{what} must be a datetime.timedelta, not {type(duration).__name__}")
    whole, rest = divmod(duration, _MS)
    if rest:
        raise ValueError(f"{what} must be a whole number of milliseconds, got {duration}")
    if whole < 0 or (whole == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'>= 0' if allow_zero else '> 0'}, got {duration}")
    return int(whole)
