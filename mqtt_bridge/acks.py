"""In-order MQTT acknowledgements that wait for Kafka.

MQTT requires PUBACKs in the order the PUBLISHes arrived, while Kafka confirms records of
different partitions in any order. So each message waits here until all of its records are
confirmed *and* every earlier message has been acknowledged.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class _Pending:
    __slots__ = ("mid", "qos", "outstanding", "failed", "started")

    def __init__(self, mid: int, qos: int, outstanding: int) -> None:
        self.mid = mid
        self.qos = qos
        self.outstanding = outstanding
        self.failed = False
        self.started = time.perf_counter()


class InOrderAcks:
    """Thread-safe: messages are added by the MQTT thread, confirmed from Kafka callbacks."""

    def __init__(self, send_ack: Callable[[int, int], object],
                 on_complete: Callable[[float], object] = lambda _seconds: None) -> None:
        self._send_ack = send_ack
        self._on_complete = on_complete
        self._queue: deque[_Pending] = deque()
        self._lock = threading.Lock()
        self.failures = 0

    def add(self, mid: int, qos: int, records: int) -> _Pending:
        entry = _Pending(mid, qos, records)
        with self._lock:
            self._queue.append(entry)
        if records == 0:
            self._release()
        return entry

    def confirm(self, entry: _Pending, ok: bool) -> None:
        with self._lock:
            entry.outstanding -= 1
            if not ok:
                entry.failed = True
                self.failures += 1
        if entry.outstanding == 0 and ok:
            self._on_complete(time.perf_counter() - entry.started)
        self._release()

    def reset(self) -> int:
        """The MQTT connection was lost: its packet ids mean nothing on the next connection and
        the broker redelivers every unacked message, so forget them all. Returns how many."""
        with self._lock:
            dropped = len(self._queue)
            self._queue.clear()
        return dropped

    def _release(self) -> None:
        """Ack from the head while the head is complete. A failed message is never acked: it
        blocks the queue until the bridge restarts and the broker redelivers it."""
        ready = []
        with self._lock:
            while self._queue and self._queue[0].outstanding <= 0 and not self._queue[0].failed:
                ready.append(self._queue.popleft())
        for entry in ready:
            if entry.qos > 0:
                self._send_ack(entry.mid, entry.qos)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def blocked_by_failure(self) -> bool:
        with self._lock:
            return bool(self._queue) and self._queue[0].failed
