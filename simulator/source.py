"""Rows of an events.json file, validated, in file order or in event-time order.

Event-time order sorts with bounded memory: chunks are sorted in memory and spilled to
temporary files, then merged. Ties keep file order (the sort key includes the line number),
so a replay is deterministic.
"""
from __future__ import annotations

import heapq
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamkit.events import Row, RowError, read_row


@dataclass(frozen=True, slots=True)
class SourceRow:
    timestamp_ms: int
    thing: str
    payload: bytes  # the row as JSON, as published


@dataclass
class SourceStats:
    rows: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def reject(self, line_no: int, exc: RowError) -> None:
        self.rejected[exc.reason] += 1
        self.examples.setdefault(exc.reason, f"line {line_no}: {exc}")


def as_json(obj: dict, row: Row) -> bytes:
    """A validated Python-dict style row as JSON: its timestamp and numbers as written."""
    row_id = {"id": row.row_id} if "id" in obj else {}
    return json.dumps({"Thing": row.thing, "Timestamp": obj["Timestamp"], **row_id,
                       **{name: obj[name] for name in row.quantities}}).encode()


def read_rows(path: Path, stats: SourceStats) -> Iterator[SourceRow]:
    """Valid rows in file order; bad lines are counted with their reason and skipped."""
    with path.open("rb") as handle:
        for line_no, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj, row = read_row(line)
            except RowError as exc:
                stats.reject(line_no, exc)
                continue
            stats.rows += 1
            # JSON lines are published as they are (no re-encoding); Python-dict style lines as
            # JSON made of what was validated (their id may be any literal, e.g. bytes).
            payload = line if line.startswith(b'{"') else as_json(obj, row)
            yield SourceRow(row.timestamp_ms, row.thing, payload)


def _spill(chunk: list[tuple[int, int, str, bytes]], directory: str) -> str:
    chunk.sort()
    fd, name = tempfile.mkstemp(prefix="sorted-", suffix=".tsv", dir=directory)
    with os.fdopen(fd, "wb") as out:
        for timestamp, seq, thing, payload in chunk:
            out.write(b"%d\t%d\t%s\t%s\n" % (timestamp, seq, thing.encode().hex().encode(), payload))
    return name


def _read_spill(name: str) -> Iterator[tuple[int, int, str, bytes]]:
    with open(name, "rb") as handle:
        for line in handle:
            timestamp, seq, thing, payload = line.rstrip(b"\n").split(b"\t", 3)
            yield int(timestamp), int(seq), bytes.fromhex(thing.decode()).decode(), payload


def sorted_rows(rows: Iterator[SourceRow], chunk_rows: int = 500_000) -> Iterator[SourceRow]:
    """Event-time order with at most ``chunk_rows`` rows in memory."""
    chunk: list[tuple[int, int, str, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="simulator-sort-") as directory:
        spills: list[str] = []
        for seq, row in enumerate(rows):
            # payloads never contain raw newlines or tabs (JSON escapes them); things are hex-encoded
            chunk.append((row.timestamp_ms, seq, row.thing, row.payload))
            if len(chunk) >= chunk_rows:
                spills.append(_spill(chunk, directory))
                chunk = []
        if not spills:
            chunk.sort()
            for timestamp, _seq, thing, payload in chunk:
                yield SourceRow(timestamp, thing, payload)
            return
        if chunk:
            spills.append(_spill(chunk, directory))
        for timestamp, _seq, thing, payload in heapq.merge(*(_read_spill(name) for name in spills)):
            yield SourceRow(timestamp, thing, payload)
