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

from streamkit.events import RowError, decode_object, validate


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


def read_rows(path: Path, stats: SourceStats) -> Iterator[SourceRow]:
    """Valid rows in file order; bad lines are counted with their reason and skipped."""
    with path.open("rb") as handle:
        for line_no, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = decode_object(line)
                row = validate(obj)
            except UnicodeDecodeError:
                stats.reject(line_no, RowError("not_utf8", "line is not UTF-8"))
                continue
            except RowError as exc:
                stats.reject(line_no, exc)
                continue
            stats.rows += 1
            # Python-dict style lines are published as JSON; JSON lines as they are (no re-encoding).
            payload = line if line.startswith(b'{"') else json.dumps(obj).encode()
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
