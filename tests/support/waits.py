"""Waits for tests whose verdict is their own assertion, right after the wait."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stacktools.harness.processes import ServiceProcess
from streamkit.deadline import TimedOut, wait_until


def settle(
    predicate: Callable[[], object], timeout_s: float, what: str, *, interval_s: float = 1.0
) -> bool:
    """``wait_until``, but False instead of :class:`TimedOut`: for a wait followed by an
    assertion that compares what the test got with what it expected, which says more than
    "timed out" would."""
    try:
        return bool(wait_until(predicate, timeout_s, what, interval_s=interval_s))
    except TimedOut:
        return False


#: A hang detector for one message's round trip through a local broker (a SUBACK, a PUBACK, a
#: delivery): milliseconds on loopback, but a machine busy with Spark stalls processes for
#: seconds, so the limit is set where only a hang reaches it.
ONE_MESSAGE_S = 60.0


def landing_limit_s(records: int) -> float:
    """How long records may take to land downstream: a minute plus 10 ms a record, a hang
    detector scaled with the work (a record takes well under a millisecond through the bridge
    and the broker), not a speed test."""
    return 60.0 + records / 100


def keep_alive(service: ServiceProcess, seconds: float, log: Path) -> None:
    """``seconds`` of a fault, the service alive throughout (a service that gives up on a
    partition or an outage is a defect); its log's end if it ended."""
    settle(lambda: not service.alive(), seconds, "the fault held")
    assert service.alive(), log.read_text()[-3000:]
