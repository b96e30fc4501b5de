"""Rows of an events file, validated, in file order or in event-time order; and the check that
refuses a file before a replay starts. The file's formats are events_file's.

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
from streamkit.events_file import EventsFileError, Layout, records, sniff


@dataclass(frozen=True, slots=True)
class SourceRow:
    timestamp_ms: int
    thing: str
    payload: bytes  # the row as JSON, as published


#: Rejected rows listed one by one (line, reason, detail) in the summary; the counts stay exact.
LISTED_REJECTIONS = 100


@dataclass
class SourceStats:
    rows: int = 0
    rejected: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    listed: list[dict[str, int | str]] = field(default_factory=list)  # the first LISTED_REJECTIONS

    def reject(self, line_no: int, exc: RowError) -> None:
        self.rejected[exc.reason] += 1
        self.examples.setdefault(exc.reason, f"line {line_no}: {exc}")
        if len(self.listed) < LISTED_REJECTIONS:
            self.listed.append({"line": line_no, "reason": exc.reason, "detail": str(exc)[:200]})

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def as_json(obj: dict, row: Row) -> bytes:
    """A validated Python-dict style row as JSON: its timestamp and numbers as written."""
    row_id = {"id": row.row_id} if "id" in obj else {}
    return json.dumps(
        {
            "Thing": row.thing,
            "Timestamp": obj["Timestamp"],
            **row_id,
            **{name: obj[name] for name in row.quantities},
        }
    ).encode()


def read_rows(path: Path, stats: SourceStats) -> Iterator[SourceRow]:
    """Valid rows in file order, from any format events_file reads; bad rows are counted with
    their line and reason and skipped. Raises EventsFileError for a file unreadable as a whole."""
    for record in records(path):
        try:
            if record.error is not None:
                raise record.error
            obj, row = read_row(record.data)
        except RowError as exc:
            stats.reject(record.line, exc)
            continue
        stats.rows += 1
        # JSON is published as it is (no re-encoding); Python-dict style rows as JSON made of
        # what was validated (their id may be any literal, e.g. bytes).
        payload = record.data if record.data.startswith(b'{"') else as_json(obj, row)
        yield SourceRow(row.timestamp_ms, row.thing, payload)


@dataclass(frozen=True)
class EventsCheck:
    """What the check before a replay learnt: the layout, and the rows in the file (valid or
    not), e.g. for a progress bar."""

    layout: Layout
    rows_in_file: int


#: The cause of "no valid row" when every rejection says the same.
_WHOLE_FILE_CAUSES = {
    "not_json": "is neither JSON lines nor a JSON array",
    "not_utf8": "is not UTF-8 text",
}


def check_events(path: Path) -> EventsCheck:
    """Refuse, before anything connects or starts, a file that cannot be replayed: unreadable,
    not decodable to its end (a damaged gzip shows only there), no rows, or no valid row among
    them. Reads the whole file once, validating rows only up to the first valid one."""
    layout = sniff(path)
    stats = SourceStats()
    rows_in_file = 0
    for record in records(path):
        rows_in_file += 1
        if stats.rows:
            continue
        try:
            if record.error is not None:
                raise record.error
            read_row(record.data)
            stats.rows += 1
        except RowError as exc:
            stats.reject(record.line, exc)
    if rows_in_file == 0:
        raise EventsFileError(path, "is an empty JSON array" if layout.array else "holds no rows")
    if not stats.rows:
        reason, _ = stats.rejected.most_common(1)[0]
        cause = (
            _WHOLE_FILE_CAUSES.get(reason, "has no valid row")
            if len(stats.rejected) == 1
            else "has no valid row"
        )
        counts = ", ".join(f"{name} {count:,}" for name, count in stats.rejected.most_common())
        first = stats.listed[0]
        raise EventsFileError(
            path,
            f"{cause}: all {rows_in_file:,} rows rejected ({counts}); first: line "
            f"{first['line']}: {first['detail']}",
        )
    return EventsCheck(layout, rows_in_file)


def _spill(chunk: list[tuple[int, int, str, bytes]], directory: str) -> str:
    chunk.sort()
    fd, name = tempfile.mkstemp(prefix="sorted-", suffix=".tsv", dir=directory)
    with os.fdopen(fd, "wb") as out:
        for timestamp, seq, thing, payload in chunk:
            out.write(
                b"%d\t%d\t%s\t%s\n" % (timestamp, seq, thing.encode().hex().encode(), payload)
            )
    return name


def _read_spill(name: str) -> Iterator[tuple[int, int, str, bytes]]:
    with open(name, "rb") as handle:
        for line in handle:
            timestamp, seq, thing, payload = line.rstrip(b"\n").split(b"\t", 3)
            yield int(timestamp), int(seq), bytes.fromhex(thing.decode()).decode(), payload


def sorted_rows(rows: Iterator[SourceRow], chunk_rows: int = 500_000) -> Iterator[SourceRow]:
    """Event-time order with at most ``chunk_rows`` rows in memory."""
    chunk: list[tuple[int, int, str, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="events-sort-") as directory:
        spills: list[str] = []
        for seq, row in enumerate(rows):
            # payloads never contain raw newlines or tabs (JSON escapes them); things are
            # hex-encoded
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
