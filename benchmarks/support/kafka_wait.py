"""Waiting for a topic to fill, with a progress line: the MQTT benchmarks time the bridges from
the first record in Kafka to the last."""

from __future__ import annotations

import time
from collections.abc import Callable

from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline, TimedOut
from streamkit.kafka_io import wait_for_count


def wait_in_kafka(
    settings: Settings,
    topic: str,
    records: int,
    what: str,
    tick: Callable[[], None] = lambda: None,
    timeout_s: float = 1800,
    on_first: Callable[[], None] = lambda: None,
) -> tuple[float, int]:
    """Poll until `topic` holds `records`, with a progress line every 5 s; `tick` runs on every
    poll, `on_first` once when the first records are seen. Returns when that was and how many
    there were then."""
    begun = last_print = time.perf_counter()
    deadline = Deadline(timeout_s)
    first: tuple[float, int] | None = None
    while (count := wait_for_count(settings, topic, records, 0.2)) < records:
        tick()
        now = time.perf_counter()
        if first is None and count > 0:
            first = (now, count)
            on_first()
        if now - last_print > 5:
            print(f"  ... {count}/{records} records in Kafka after {now - begun:.0f} s", flush=True)
            last_print = now
        if deadline.expired():
            raise TimedOut(f"{what} did not finish within {timeout_s:.0f} s")
    tick()
    return first or (time.perf_counter(), records)
