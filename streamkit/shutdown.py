"""Graceful shutdown: SIGTERM/SIGINT set an event that service loops poll between units of work.

A service must finish the unit it is in (flush the producer, commit offsets, close clients)
rather than die mid-write, so the signal handler only records the request.
"""

from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger(__name__)


class ShutdownFlag:
    def __init__(self) -> None:
        self._event = threading.Event()

    def install(self) -> ShutdownFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: object) -> None:
        log.info("shutdown requested", extra={"signal": signal.Signals(signum).name})
        self._event.set()

    def request(self) -> None:
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep that wakes up early on shutdown; returns True when shutdown was requested."""
        return self._event.wait(timeout)
