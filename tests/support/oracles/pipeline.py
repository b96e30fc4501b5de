"""Offline oracles that end-to-end tests compare committed output with: what the data says,
computed without the services (the join library's per-record path on the records the raw
topic holds), so a test never takes a service's own verdict for the truth."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from mqtt_bridge.records import RowSplitter
from simulator.source import SourceStats, read_rows, sorted_rows
from spark_jobs.config import JoinSettings
from spark_jobs.join import join_config
from lsb import LocalStreamBuffer
from streamkit.wire import AvroCodec
from streamkit.events import Row, parse_row

Record = tuple[str, str, int, float]  # thing, quantity, event time ms, value


def file_rows(events: Path) -> list[Row]:
    """Every row of an events.json in file order (``--order file``)."""
    return [parse_row(line) for line in events.read_bytes().splitlines() if line.strip()]


def event_time_rows(events: Path) -> list[Row]:
    """The rows in the simulator's default order: by event time, ties in file order."""
    return [parse_row(row.payload) for row in sorted_rows(read_rows(events, SourceStats()))]


def distinct_records(rows: Iterable[Row]) -> list[Record]:
    """The records the bridge makes of the rows, through its own Avro encoding, first of each
    key (a re-sent row's records are byte-identical and set aside)."""
    splitter, codec, seen, out = RowSplitter(2), AvroCodec("measurement"), set(), []
    for row in rows:
        for record in splitter.split(row):
            if record.key not in seen:
                seen.add(record.key)
                r = codec.decode(record.value)
                out.append((r["thing"], r["quantity"], r["event_time_ms"], r["value"]))
    return out


def join_pairs(settings: JoinSettings, fed: Iterable[Record]) -> tuple[Counter, int]:
    """Pairs certain after the whole input (no end-of-stream flush: a stream never ends) and
    the number of handed-back records, from the library's per-record path."""
    config = join_config(settings)
    buffer = LocalStreamBuffer(config)
    pairs: Counter = Counter()
    late = 0
    for thing, quantity, time_ms, value in fed:
        if config.quantity_code(quantity) < 0:
            continue
        step = buffer.push(thing, quantity, time_ms, value)
        pairs.update((p.key, p.left_quantity, p.right_quantity, p.left_time, p.right_time) for p in step.pairs)
        late += len(step.late)
    return pairs, late
