"""Waits for tests whose verdict is their own assertion, right after the wait."""
from __future__ import annotations

from collections.abc import Callable

from streamkit.deadline import TimedOut, wait_until


def settle(predicate: Callable[[], object], timeout_s: float, what: str, *, interval_s: float = 1.0) -> bool:
    """``wait_until``, but False instead of :class:`TimedOut`: for a wait followed by an
    assertion that compares what the test got with what it expected, which says more than
    "timed out" would."""
    try:
        return bool(wait_until(predicate, timeout_s, what, interval_s=interval_s))
    except TimedOut:
        return False
