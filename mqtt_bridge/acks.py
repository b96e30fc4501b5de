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
    """One message waiting for Kafka, and the ``on_delivery`` callback of all its records
    (confluent_kafka calls it once per record): the bridge makes nothing else per message to
    count its records down, and a report costs one frame on top of ``confirm``."""

    __slots__ = ("mid", "qos", "outstanding", "failed", "started", "_acks")

    def __init__(self, acks: InOrderAcks, mid: int, qos: int, outstanding: int) -> None:
        self._acks = acks
        self.mid = mid
        self.qos = qos
        self.outstanding = outstanding
        self.failed = False
        self.started = time.perf_counter()

    def __call__(self, err: object | None, _msg: object = None) -> None:
        """confluent_kafka's delivery report of one of this message's records (err None: stored)."""
        if err is not None:
            self._acks.on_delivery_failure(err)
        self._acks.confirm(self, err is None)


class InOrderAcks:
    """Thread-safe: messages are added by the MQTT thread, confirmed from Kafka callbacks
    (served by whichever thread polls the producer)."""

    def __init__(
        self,
        send_ack: Callable[[int, int], object],
        on_complete: Callable[[float], object] = lambda _seconds: None,
        on_delivery_failure: Callable[[object], object] = lambda _err: None,
    ) -> None:
        self._send_ack = send_ack
        self._on_complete = on_complete
        self.on_delivery_failure = on_delivery_failure
        self._queue: deque[_Pending] = deque()
        self._lock = threading.Lock()
        self.failures = 0

    def add(self, mid: int, qos: int, records: int) -> _Pending:
        """Queue a message of ``records`` records; the entry returned is their delivery callback."""
        entry = _Pending(self, mid, qos, records)
        with self._lock:
            self._queue.append(entry)
        if records == 0:
            self._release()
        return entry

    def confirm(self, entry: _Pending, ok: bool) -> None:
        """One record of ``entry`` is settled. Only the last confirmation of a message can let
        acks leave (every earlier one leaves the head as it was), so only that one looks."""
        with self._lock:
            entry.outstanding -= 1
            if not ok:
                entry.failed = True
                self.failures += 1
                return
            if entry.outstanding > 0 or entry.failed:
                return
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
