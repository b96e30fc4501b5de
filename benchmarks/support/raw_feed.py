"""Generated rows into a raw topic exactly as the bridge writes them (Avro values, keys
thing|quantity|event_ms, partition crc32(thing) % P), so a benchmark's jobs read what they
read in production without an MQTT hop in front."""

from __future__ import annotations

from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from stacktools.stack.settings import Settings
from streamkit.events import validate
from streamkit.kafka_clients import idempotent_producer, partition_count

#: One record of a joined stream, for a baseline in the benchmark's own process.
StreamRecord = tuple[str, int, float]  # quantity, event time ms, value


def feed(
    settings: Settings,
    raw: str,
    rows: int,
    wanted: frozenset[str] = frozenset(),
    things: int = 8,
    seed: int = 3,
) -> tuple[int, dict[str, list[StreamRecord]]]:
    """Generated rows -> raw topic; returns the record count and, per thing, the records of the
    ``wanted`` quantities in arrival order."""
    splitter = RowSplitter(partition_count(settings, raw))
    producer = idempotent_producer(
        settings, "bench-feed", **{"queue.buffering.max.messages": 2_000_000}
    )
    count = 0
    streams: dict[str, list[StreamRecord]] = {}
    for obj in generate(rows, things, seed=seed):
        row = validate(obj)
        for record in splitter.split(row):
            producer.produce(raw, record.value, record.key, partition=record.partition)
            count += 1
        producer.poll(0)
        if wanted:
            entry = streams.setdefault(row.thing, [])
            entry.extend((q, row.timestamp_ms, v) for q, v in row.quantities.items() if q in wanted)
    if producer.flush(120):
        raise RuntimeError(f"records still unsent to {raw} after 120 s")
    return count, streams
