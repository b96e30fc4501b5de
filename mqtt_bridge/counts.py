"""The bridge's per-message counters, kept as plain integers and read when /metrics is scraped.

The MQTT thread is their only writer, so ``+= 1`` needs no lock, and a scrape sees them
exact; a prometheus_client Counter would take a lock and check its state on every message.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily

OUTCOMES = ("ok", "deferred", "dlq")


class Counts:
    """A prometheus_client collector (``REGISTRY.register``) for ``bridge_messages_total``
    {outcome} and ``bridge_records_total``."""

    def __init__(self) -> None:
        self.ok = 0  # produced to the raw topic
        self.deferred = (
            0  # left unacked for the next run (shutting down, or after a failed produce)
        )
        self.dlq = 0  # dead-lettered
        self.records = 0  # raw-topic records produced

    def collect(self) -> list[CounterMetricFamily]:
        messages = CounterMetricFamily(
            "bridge_messages", "MQTT messages taken in, by outcome", labels=["outcome"]
        )
        for outcome in OUTCOMES:
            messages.add_metric([outcome], getattr(self, outcome))
        records = CounterMetricFamily("bridge_records", "Kafka records produced to the raw topic")
        records.add_metric([], self.records)
        return [messages, records]
